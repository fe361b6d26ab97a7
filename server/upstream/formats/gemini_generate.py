"""Gemini generateContent and streamGenerateContent on Gemini channels (type 24), in pass-through: any
model, text or speech (docs/api/gateway.md#gemini-generatecontent-g1).

The path names the model and the method (`providers.gemini.Gemini.operation`); the body is checked by
`providers.gemini_body`. A stream goes to the caller as the upstream's server-sent events (`?alt=sse`),
or re-assembled into Google's JSON-array form; its usage is the last `usageMetadata`. Usage: input =
`promptTokenCount` + `toolUsePromptTokenCount` − `cachedContentTokenCount`, cache reads =
`cachedContentTokenCount`, output = `candidatesTokenCount` + `thoughtsTokenCount`.
"""

from __future__ import annotations

import json
from typing import Any

from server.upstream.formats.base import Answer, Channel, Counter
from server.upstream.formats.openai_compat import json_or_none
from server.upstream.formats.sse import data_of
from server.upstream.providers.base import (
    Asked,
    Operation,
    Params,
    Provider,
    StreamForm,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    Usage,
)
from server.upstream.providers.gemini import GEMINI, usage_of_metadata


def texts_of_generate(data: Any) -> list[str]:
    out: list[str] = []
    candidates = data.get("candidates") if isinstance(data, dict) else None
    if isinstance(candidates, list):
        for candidate in candidates:
            content = candidate.get("content") if isinstance(candidate, dict) else None
            parts = content.get("parts") if isinstance(content, dict) else None
            if isinstance(parts, list):
                for part in parts:
                    if isinstance(part, dict):
                        if isinstance(part.get("text"), str):
                            out.append(part["text"])
                        call = part.get("functionCall")
                        if isinstance(call, dict):
                            out.append(json.dumps(call, ensure_ascii=False))
    return out


class GenerateStream:
    """Events as sent (`sse`), or their data joined into one JSON array."""

    __slots__ = ("_datas", "_delivered", "form", "usage")

    def __init__(self, form: StreamForm) -> None:
        self.form = form
        self.usage: Usage | None = None
        self._datas: list[bytes] = []
        self._delivered = 0

    def delivered(self) -> list[str]:
        out: list[str] = []
        for data in self._datas:
            out.extend(texts_of_generate(json_or_none(data)))
        return out

    def start(self) -> bytes:
        return self.form.head

    def event(self, raw: bytes) -> bytes:
        data = data_of(raw)
        if not data:
            return raw if self.form.sse else b""
        if b"usageMetadata" in data:
            chunk = json_or_none(data)
            if isinstance(chunk, dict):
                self.usage = usage_of_metadata(chunk.get("usageMetadata")) or self.usage
        self._datas.append(data)
        if self.form.sse:
            return raw
        out = (self.form.separator if self._delivered else b"") + data
        self._delivered += 1
        return out

    def end(self) -> bytes:
        return self.form.tail

    def error(self, status: int, code: str, message: str) -> bytes:
        payload = GEMINI.stream_error(status, message)
        if self.form.sse:
            return b"data: " + payload + b"\r\n\r\n"
        return (self.form.separator if self._delivered else b"") + payload + self.form.tail


class GeminiNative:
    """The pass-through exchange of a Gemini channel."""

    conversion: tuple[str, str] | None = None

    def request(self, channel: Channel, key: str, op: Operation, asked: Asked, upstream_model: str,
                body: bytes) -> UpstreamCall:
        return GEMINI.upstream_call(channel, key, op, asked, upstream_model, body)

    def reply(self, op: Operation, asked: Asked, body: bytes) -> Answer:
        data = json_or_none(body)
        if not isinstance(data, dict):
            raise UnreadableReply("a reply that is not a JSON object")
        usage = usage_of_metadata(data.get("usageMetadata"))
        return Answer(body, usage, [] if usage is not None else texts_of_generate(data))

    def stream(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> GenerateStream:
        assert op.form is not None
        return GenerateStream(op.form)

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return GEMINI.upstream_error(status, body)


_NATIVE = GeminiNative()


class GenerateFormat:
    name = "generate"
    dialect: Provider = GEMINI
    channel_types: frozenset[int] = GEMINI.channel_types
    forwards: tuple[str, ...] = ()

    def operation(self, target: str, args: Params) -> Operation:
        return GEMINI.operation(target, args)

    def read_body(self, op: Operation, body: bytes) -> Asked:
        return GEMINI.read_body(op, body)

    def exchange(self, channel_type: int) -> GeminiNative:
        if channel_type not in self.channel_types:
            raise KeyError(channel_type)
        return _NATIVE


GENERATE_FORMAT = GenerateFormat()
