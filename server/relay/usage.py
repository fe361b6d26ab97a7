"""Token usage read from upstream replies (docs/API.md#token-usage-and-estimates), and the SSE framing the
streaming relay needs.

Usage is always read from a parsed copy; the bytes sent to the caller are the upstream's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    prompt: int
    completion: int
    audio_output: int = 0
    text_output: int = 0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def gemini_usage(meta: Any) -> Usage | None:
    """`usageMetadata` → Usage; None when absent or not an object."""
    if not isinstance(meta, dict):
        return None
    prompt = _int(meta.get("promptTokenCount")) + _int(meta.get("toolUsePromptTokenCount"))
    if "candidatesTokenCount" in meta:
        completion = _int(meta.get("candidatesTokenCount")) + _int(meta.get("thoughtsTokenCount"))
    else:
        completion = max(0, _int(meta.get("totalTokenCount")) - prompt)
    audio = text = 0
    details = meta.get("candidatesTokensDetails")
    if isinstance(details, list):
        for d in details:
            if isinstance(d, dict):
                if d.get("modality") == "AUDIO":
                    audio += _int(d.get("tokenCount"))
                elif d.get("modality") == "TEXT":
                    text += _int(d.get("tokenCount"))
    return Usage(prompt, completion, audio, text)


def usage_of_body(body: bytes) -> Usage | None:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return gemini_usage(data.get("usageMetadata")) if isinstance(data, dict) else None


class SseSplitter:
    """Cuts an SSE byte stream into events (blank-line separated, `\\n` or `\\r\\n`), across chunk
    boundaries; `data_of` joins an event's `data:` lines."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buf += chunk.replace(b"\r\n", b"\n")
        *events, self._buf = self._buf.split(b"\n\n")
        return [e for e in events if e.strip()]

    def rest(self) -> list[bytes]:
        rest, self._buf = self._buf, b""
        return [rest] if rest.strip() else []

    @staticmethod
    def data_of(event: bytes) -> bytes:
        lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        return b"\n".join(lines)


def usage_of_event(data: bytes) -> Usage | None:
    if b"usageMetadata" not in data:
        return None
    return usage_of_body(data)
