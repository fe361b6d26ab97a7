"""Server-sent events as an upstream sends them: whole events, byte for byte, and the data they carry.

`Events.feed` returns each complete event as its raw bytes, blank line included, so a pass-through writes
exactly what the upstream sent; an event split across reads waits for its end (it is not complete yet),
and nothing else is held. Lines may end in `\\n` or `\\r\\n` (a mix too). `data_of` joins an event's
`data:` lines with `\\n` (the SSE rule; `event:`, `id:` and comment lines are skipped); `name_of` reads
its `event:` line.
"""

from __future__ import annotations

import re

_END = re.compile(rb"\r?\n\r?\n")


class Events:
    """Cuts a byte stream into whole SSE events."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk if self._buf else chunk
        events: list[bytes] = []
        start = 0
        while (end := _END.search(buf, start)) is not None:
            events.append(buf[start:end.end()])
            start = end.end()
        self._buf = buf[start:]
        return events

    def rest(self) -> bytes:
        """What is left when the upstream ended without a final blank line (b"" when nothing)."""
        rest, self._buf = self._buf, b""
        return rest if rest.strip() else b""


def data_of(event: bytes) -> bytes:
    if event.startswith(b"data: ") and event.count(b"\n") <= 2 and b"\ndata:" not in event:  # the usual
        return event[6:].rstrip(b"\r\n")
    lines = []
    for line in event.splitlines():
        if line.startswith(b"data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(lines)


def name_of(event: bytes) -> bytes:
    for line in event.splitlines():
        if line.startswith(b"event:"):
            return line[6:].strip()
    return b""


def frame(data: bytes) -> bytes:
    """One `data:` event of ours."""
    return b"data: " + data + b"\n\n"
