"""Tollway's shared state: what every worker and node of one deployment shares through one store.

Every subsystem uses it, not only the quota engine: broadcasts (`broadcasts.py`) and the version counters
that give read-your-writes to the state workers cache (`versions.py`), the records' memos and shared copies
(`records.py`, `cache.py`), locks (`locks.py`), short-lived keys, GCRA rate limits, and the stores behind
them — Redis (`redis.py`, its pipelined connection `redis_pipe.py`, atomic steps as Lua scripts in
`backend/lua/`) and the in-process store of embedded mode (`memory.py`) — with the observer of their
failures (`observer.py`).

The storage interface (`base.py`) is split by capability — `KeyValue`, `RateLimits`, `VersionCounters`,
`PubSub` — so that each component asks only for what it uses; `Backend` is all of them, what the app builds.

It stands apart from `quota/`, which is about money (reservations, settlement, the sync to SQL) and is built
on it: this package imports nothing of the project's (tests/test_layers.py), and `quota/` imports only it.
"""
