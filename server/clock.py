"""The one clock of the service: wall time in unix seconds, movable by tests (`shift`)."""

from __future__ import annotations

import time


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() + self.offset

    def now_s(self) -> int:
        return int(self.now())

    def shift(self, seconds: float) -> None:
        self.offset += seconds
