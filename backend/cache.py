"""An in-process memo with a short lifetime, for records that other workers may change.

Entries live at most `ttl` seconds; `drop` and `clear` are called by the invalidation broadcast so that a
change is seen at once on every worker, and the lifetime bounds the damage of a lost message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LocalMemo(Generic[K, V]):
    def __init__(self, ttl: float, *, clock: Callable[[], float] = time.monotonic, max_size: int = 100_000
                 ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._max = max_size
        self._items: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> tuple[bool, V | None]:
        item = self._items.get(key)
        if item is None:
            return False, None
        if item[0] <= self._clock():
            self._items.pop(key, None)
            return False, None
        return True, item[1]

    def put(self, key: K, value: V) -> None:
        if self.ttl <= 0:
            return
        if len(self._items) >= self._max:
            self._items.clear()
        self._items[key] = (self._clock() + self.ttl, value)

    def drop(self, key: K) -> None:
        self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()
