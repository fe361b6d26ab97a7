"""Tollway's quota engine — money: pure asyncio, no Sanic, no SQLAlchemy.

`QuotaEngine` (engine.py) holds, settles and adjusts balances on a `QuotaStore` (store.py) with two
implementations that pass one shared test suite: `RedisQuotaStore` (backends/redis_quota.py, atomic steps as
Lua scripts in `quota/lua/`) and `MemoryQuotaStore` (backends/memory_quota.py, embedded mode, one process);
`QuotaSync` (sync.py) moves the settled usage to SQL exactly once, the partitions (partitions.py) and their
leases (leases.py) split that work. `ModelRateLimiter` (ratelimit.py) builds the model calls' rate limits,
which ride on the reservation.

It is built on the shared state of `backend/` (the stores' connections, rate limits, version counters) and
imports nothing else of the project's (tests/test_layers.py).
"""
