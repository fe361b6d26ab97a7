"""The domain core: the names and shapes of Tollway's domain, in one home.

Roles, statuses and types (`enums`), who is asking (`identity`), the typed option snapshot (`settings`)
and the multi-key state of a channel (`multikey`). Everything here is plain Python on the standard
library: `models/` (the SQL layer) and `server/` both import it, and it imports neither of them, nor
Sanic, SQLAlchemy or `quota/`. A value that is stored in a column or sent on the wire is spelled here
once, as an enum member; the wire and the database keep seeing the same integers (or strings).
"""
