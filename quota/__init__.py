"""Tollway's quota, rate and cache engine: pure asyncio, no Sanic, no SQLAlchemy.

Strategies (rate limiting, and later reservations and settlement) run over one storage interface,
`backend.base.Backend`, with two implementations that pass one shared test suite:
`RedisBackend` (atomic steps as Lua scripts in `quota/lua/`) and `MemoryBackend` (embedded mode, one process).
"""
