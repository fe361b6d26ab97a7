"""The invalidation channel's listener, and who handles which message: handlers register themselves.

Every worker subscribes to one pub/sub channel (`invalidate`; with Redis its name also carries the key
prefix and the database number, so that only the workers of one deployment hear each other:
backend/redis.py). A message is a hint, not a fact to adopt: a handler drops what it holds or
reads the current state from the store (backend/versions.py). A component that caches shared state
registers the message prefix it owns and an async handler (`register("rec:key:", …)`), and what to do
after every (re)subscription, when messages may have been missed (`on_resubscribe`). Adding a subsystem
that caches something (2FA, passkeys, payments) adds a registration where it is built, not a branch here.

A handler that fails is logged and the listener goes on: one bad message must not stop invalidation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from backend.base import SUBSCRIBED, PubSub

log = logging.getLogger("tollway.broadcasts")

CHANNEL = "invalidate"
Handler = Callable[[str], Awaitable[None]]


class Broadcasts:
    def __init__(self, backend: PubSub, channel: str = CHANNEL) -> None:
        self.backend = backend
        self.channel = channel
        self._handlers: list[tuple[str, Handler]] = []
        self._resubscribed: list[Callable[[], Awaitable[None]]] = []

    def register(self, prefix: str, handler: Handler) -> None:
        """`handler(message)` for every message that starts with `prefix`; the longest one wins."""
        if any(p == prefix for p, _ in self._handlers):
            raise ValueError(f"broadcast prefix {prefix!r} is registered twice")
        self._handlers.append((prefix, handler))
        self._handlers.sort(key=lambda item: len(item[0]), reverse=True)

    def on_resubscribe(self, handler: Callable[[], Awaitable[None]]) -> None:
        self._resubscribed.append(handler)

    async def publish(self, message: str) -> None:
        await self.backend.publish(self.channel, message)

    async def dispatch(self, message: str) -> bool:
        """Run the handler that owns `message`; False when nobody does (ignored)."""
        for prefix, handler in self._handlers:
            if message.startswith(prefix):
                await handler(message)
                return True
        return False

    async def listen(self) -> None:
        """Apply every broadcast of any worker (this one included) until cancelled."""
        async for _channel, message in self.backend.subscribe(self.channel):
            try:
                if message == SUBSCRIBED:  # (re)subscribed: whatever was broadcast meanwhile is lost
                    for handler in self._resubscribed:
                        await handler()
                else:
                    await self.dispatch(message)
            except Exception:
                log.exception("could not apply broadcast %r", message[:100])
