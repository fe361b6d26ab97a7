"""Gemini embedContent and batchEmbedContents on Gemini channels (type 24), in pass-through
(docs/CHAT.md#gemini-embeddings).

    caller   POST /v1beta/models/{model}:embedContent          {"content": {"parts": [...]}}
             POST /v1beta/models/{model}:batchEmbedContents    {"requests": [{"content": ..., "model": ...}]}
             (also under /v1/models/); never streamed
    upstream POST {base}/v1beta/models/{upstream model}:embedContent (or :batchEmbedContents)  x-goog-api-key

Checked, each a 400 naming the field before anything is reserved or sent: embedContent's `content` (an
object with a `parts` array of objects); batchEmbedContents' `requests` (a non-empty array of objects,
each with a `content` as above). The body goes up byte for byte: only the path's model is mapped (the
`model` a batch names inside each request is the caller's, left as sent). The texts of the parts are the
prompt estimate; the reservation is that estimate alone, with no `PreConsumedQuota` floor and no output.
Billed on `usageMetadata.promptTokenCount`; the real API often sends no usage at all, and the call is then
billed on the estimate (`usage_estimated`).
"""

from __future__ import annotations

from typing import Any

from server.upstream.formats.base import Answer, Channel, Counter, StreamMapper
from server.upstream.formats.openai_compat import json_or_none, whole_count
from server.upstream.providers.base import (
    Asked,
    Operation,
    Params,
    Provider,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    Usage,
    base_of,
    upstream_headers,
)
from server.upstream.providers.bodies import invalid, parse_object
from server.upstream.providers.gemini import DEFAULT_BASE, GEMINI, read_target
from server.upstream.providers.gemini_body import texts_of_parts

EMBED, BATCH = "embedContent", "batchEmbedContents"
EMBED_METHODS = (EMBED, BATCH)


def _content_texts(content: Any, label: str, out: list[str]) -> None:
    if not isinstance(content, dict):
        raise invalid(f"{label}: must be an object with a parts array", label.split(".")[0].split("[")[0])
    texts_of_parts(content.get("parts"), f"{label}.parts", out)


def read_embed(op: Operation, body: bytes) -> Asked:
    """What an embedding body asks for: its parts' texts, reserved as the prompt alone."""
    assert op.model is not None
    data = parse_object(body)
    texts: list[str] = []
    if op.name == EMBED:
        _content_texts(data.get("content"), "content", texts)
    else:
        requests = data.get("requests")
        if not isinstance(requests, list) or not requests:
            raise invalid("requests: must be a non-empty array of objects", "requests")
        for i, request in enumerate(requests):
            if not isinstance(request, dict):
                raise invalid(f"requests[{i}]: must be an object", "requests")
            _content_texts(request.get("content"), f"requests[{i}].content", texts)
    return Asked(op.model, texts, False, 0, floor=False)


def usage_of_embed(data: Any) -> Usage | None:
    """`usageMetadata.promptTokenCount` as input; None when the reply carries none (billed on the
    estimate)."""
    meta = data.get("usageMetadata") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or "promptTokenCount" not in meta:
        return None
    return Usage(whole_count(meta.get("promptTokenCount")), 0)


class GeminiEmbed:
    """The pass-through exchange of a Gemini channel for the embedding methods."""

    conversion: tuple[str, str] | None = None

    def request(self, channel: Channel, key: str, op: Operation, asked: Asked, upstream_model: str,
                body: bytes) -> UpstreamCall:
        url = f"{base_of(channel, DEFAULT_BASE)}/v1beta/models/{upstream_model}:{op.name}"
        headers = upstream_headers(channel, {"x-goog-api-key": key}, "application/json")
        return UpstreamCall("POST", url, headers, body)

    def reply(self, op: Operation, asked: Asked, body: bytes) -> Answer:
        data = json_or_none(body)
        if not isinstance(data, dict):
            raise UnreadableReply("a reply that is not a JSON object")
        return Answer(body, usage_of_embed(data), [])

    def stream(self, op: Operation, asked: Asked, channel: Channel, count: Counter) -> StreamMapper:
        raise AssertionError("an embedding call never streams")

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return GEMINI.upstream_error(status, body)


_EMBED = GeminiEmbed()


class EmbedFormat:
    name = "embed"
    dialect: Provider = GEMINI
    channel_types: frozenset[int] = GEMINI.channel_types
    forwards: tuple[str, ...] = ()

    def operation(self, target: str, args: Params) -> Operation:
        model, method = read_target(target, EMBED_METHODS)
        return Operation(method, model)

    def read_body(self, op: Operation, body: bytes) -> Asked:
        return read_embed(op, body)

    def exchange(self, channel_type: int) -> GeminiEmbed:
        if channel_type not in self.channel_types:
            raise KeyError(channel_type)
        return _EMBED


EMBED_FORMAT = EmbedFormat()
