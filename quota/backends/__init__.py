"""Storage backends of the engine: Redis (shared by workers and nodes) and in-process (embedded mode)."""

from quota.backends.base import Backend, BackendUnavailable, RateResult
from quota.backends.memory import MemoryBackend
from quota.backends.redis import RedisBackend

__all__ = ["Backend", "BackendUnavailable", "MemoryBackend", "RateResult", "RedisBackend"]
