"""A lock shared by every worker and node that uses the backend: at most one holder of a name at a time.

For maintenance jobs that must not run twice at once anywhere in the cluster (rebuilding every ability):
the lock is one key taken with "set if absent" and a time to live, so a holder that dies without
releasing it blocks others only until the key expires. Releasing deletes the key only if it still holds
this holder's random token, so a holder that outlived its time to live never releases a lock that
someone else has taken since. In embedded mode the in-process backend gives the same semantics.

    async with exclusive(backend, "lock:channel-fix", ttl=600):
        ...   # raises Busy at once when another holder has it
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator

from backend.base import BackendUnavailable, KeyValue

log = logging.getLogger("tollway.locks")


class Busy(RuntimeError):
    """Another worker or node holds the lock."""


@contextlib.asynccontextmanager
async def exclusive(backend: KeyValue, key: str, *, ttl: float) -> AsyncIterator[None]:
    """Hold the lock `key` for the block (at most `ttl` seconds); `Busy` when it is held elsewhere."""
    token = secrets.token_hex(16)
    if not await backend.set_text_if_absent(key, token, ttl):
        raise Busy(key)
    try:
        yield
    finally:
        try:
            await backend.delete_if_equal(key, token)
        except BackendUnavailable:  # it expires by itself
            log.warning("could not release the lock %s; it expires within %.0f s", key, ttl)
