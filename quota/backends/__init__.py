"""The quota store's backends: on Redis (shared by workers and nodes) and in-process (embedded mode), each
built on the shared-state backend of the same kind (backend/redis.py, backend/memory.py)."""
