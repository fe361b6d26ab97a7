"""Google Gemini (channel type 24) as the gateway speaks it: generateContent, plain and streamed (the
embedding methods, `:embedContent` and `:batchEmbedContents`, are `formats/gemini_embed.py`'s).

    caller   POST /v1beta/models/{model}:generateContent          (also under /v1/models/, the SDK's default)
             POST /v1beta/models/{model}:streamGenerateContent    [?alt=sse]
             key: x-goog-api-key, ?key=, or Authorization
    upstream POST {base}/v1beta/models/{upstream model}:generateContent                x-goog-api-key
             POST {base}/v1beta/models/{upstream model}:streamGenerateContent?alt=sse
    usage    usageMetadata (docs/api/gateway.md#token-usage-and-estimates)
    errors   {"error": {"code", "message", "status", "details": [ErrorInfo]}}; an API_KEY_INVALID 400 is a
             bad channel key and counts as a 401 (docs/api/channels.md#selection-and-retries)

A streamed answer goes to the caller as the upstream's server-sent events (`?alt=sse`) or re-assembled
into Google's JSON-array form. There is no balance query.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from core.enums import ChannelType
from server.components.catalog import SPEECH_OUTPUT
from server.errors import UnknownMethod
from server.upstream.providers.base import (
    SSE,
    Asked,
    BalanceQuery,
    ChannelTarget,
    ListedModel,
    ModelPage,
    Operation,
    Params,
    StreamForm,
    TestOutcome,
    UnreadableReply,
    UpstreamCall,
    UpstreamError,
    Usage,
    base_of,
    bearer,
    error_object,
    json_object,
    message_of,
    passed,
    upstream_headers,
)
from server.upstream.providers.bodies import check_model_name, invalid
from server.upstream.providers.gemini_body import parse_generate

DEFAULT_BASE = "https://generativelanguage.googleapis.com"
GENERATE, STREAM = "generateContent", "streamGenerateContent"
METHODS = (GENERATE, STREAM)
V1_CALLS = "/v1/models/"  # a path under /v1 is a Gemini call once it names a method (`model:method`)
ARRAY = StreamForm(sse=False, content_type="application/json", head=b"[", separator=b",\r\n", tail=b"]")
TEST_VOICE = "Kore"  # a built-in voice, for the smallest speech request
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
          409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
          501: "UNIMPLEMENTED", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def google_status(status: int) -> str:
    if status in STATUS:
        return STATUS[status]
    return "INTERNAL" if status >= 500 else "INVALID_ARGUMENT"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def method_of(target: str) -> str:
    """The method a Gemini path names (`{model}:{method}`, `%3A` = `:`); "" when it names none."""
    _, sep, method = unquote(target).rpartition(":")
    return method if sep else ""


def read_target(target: str, methods: Collection[str]) -> tuple[str, str]:
    """The model and the method of `{model}:{method}` (one path segment, `%3A` = `:`, a leading `models/`
    stripped once): a method not in `methods` is a 404, an empty or malformed model a 400."""
    target = unquote(target)
    if target.startswith("models/"):
        target = target[len("models/"):]
    model, sep, method = target.rpartition(":")
    if not sep or method not in methods:
        raise UnknownMethod(f"unknown method {method or target!r}")
    if not model or "/" in model:
        raise invalid("model: must not be empty")
    check_model_name(model)
    return model, method


def usage_of_metadata(meta: Any) -> Usage | None:
    """`usageMetadata` → Usage; None when absent or not an object."""
    if not isinstance(meta, dict):
        return None
    prompt = _int(meta.get("promptTokenCount")) + _int(meta.get("toolUsePromptTokenCount"))
    cached = _int(meta.get("cachedContentTokenCount"))
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
    return Usage(max(0, prompt - cached), completion, cache_read=cached, audio_output=audio, text_output=text)


def usage_of_body(body: bytes) -> Usage | None:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return usage_of_metadata(data.get("usageMetadata")) if isinstance(data, dict) else None


def is_key_invalid(status: int, body: bytes) -> bool:
    """A 400 whose ErrorInfo reason is API_KEY_INVALID: a bad channel key."""
    if status != 400 or b"API_KEY_INVALID" not in body:
        return False
    try:
        details = json.loads(body)["error"]["details"]
        return any(isinstance(d, dict) and d.get("reason") == "API_KEY_INVALID" for d in details)
    except (ValueError, KeyError, TypeError):
        return False


class Gemini:
    channel_type = ChannelType.GEMINI
    channel_types: frozenset[int] = frozenset({ChannelType.GEMINI})
    owned_by = "google"
    default_base = DEFAULT_BASE
    request_id_headers: tuple[str, ...] = ("X-Request-Id",)

    @staticmethod
    def names_method(path: str) -> bool:
        """A path under `/v1` that is a Gemini call (`/v1/models/{model}:{method}`), not an OpenAI route."""
        return path.startswith(V1_CALLS) and ":" in path

    # ---- the caller's request -------------------------------------------------------------------------

    def caller_key(self, headers: Params, args: Params) -> str:
        header = headers.get("x-goog-api-key")
        if header:
            return str(header).strip()
        query = args.get("key")
        if query:
            return str(query).strip()
        return bearer(headers.get("authorization") or "")

    def operation(self, target: str, args: Params) -> Operation:
        """`{model}:generateContent` or `{model}:streamGenerateContent` (`read_target`)."""
        model, method = read_target(target, METHODS)
        if method == GENERATE:
            return Operation(GENERATE, model)
        return Operation(STREAM, model, True, SSE if args.get("alt") == "sse" else ARRAY)

    def read_body(self, op: Operation, body: bytes) -> Asked:
        assert op.model is not None
        parsed = parse_generate(body)
        # a speech answer without a cap is reserved at twice the prompt's characters
        # (docs/api/gateway.md#billing) (a text answer without a cap reserves `PreConsumedCompletionTokens`:
        # None)
        completion = parsed.max_output_tokens or (2 * parsed.content_chars if parsed.wants_audio else None)
        return Asked(op.model, parsed.texts, parsed.wants_audio, completion, stream=op.stream)

    # ---- the upstream call ----------------------------------------------------------------------------

    def upstream_call(self, channel: ChannelTarget, key: str, op: Operation, asked: Asked,
                      upstream_model: str, body: bytes) -> UpstreamCall:
        base = base_of(channel, DEFAULT_BASE)
        if op.stream:
            return UpstreamCall("POST", f"{base}/v1beta/models/{upstream_model}:{STREAM}?alt=sse",
                                upstream_headers(channel, {"x-goog-api-key": key}, "text/event-stream"),
                                body, True)
        return UpstreamCall("POST", f"{base}/v1beta/models/{upstream_model}:{GENERATE}",
                            upstream_headers(channel, {"x-goog-api-key": key}, "application/json"), body)

    def upstream_error(self, status: int, body: bytes) -> UpstreamError:
        return UpstreamError(401 if is_key_invalid(status, body) else status, message_of(body))

    # ---- our answers in this wire ---------------------------------------------------------------------

    def refusal_status(self, status: int, code: str) -> int:
        return status

    def error_body(self, status: int, code: str, message: str, param: str | None, *, upstream: bool
                   ) -> bytes:
        body = {"error": {"code": status, "message": message, "status": google_status(status),
                          "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                       "reason": code, "domain": "tollway"}]}}
        return json.dumps(body, ensure_ascii=False).encode()

    def is_error_body(self, body: bytes) -> bool:
        error = error_object(body)
        if error is None:
            return False
        code = error.get("code")
        return (isinstance(code, int) and not isinstance(code, bool) and isinstance(error.get("status"), str)
                and isinstance(error.get("message"), str))

    def stream_error(self, status: int, message: str) -> bytes:
        return json.dumps({"error": {"code": status, "message": message,
                                     "status": google_status(status)}}).encode()

    def model_list(self, models: Sequence[ListedModel]) -> dict[str, Any]:
        return {"models": [{"name": f"models/{m.id}", "displayName": m.id,
                            "supportedGenerationMethods": list(METHODS)} for m in models]}

    # ---- channel administration -----------------------------------------------------------------------

    def models_call(self, channel: ChannelTarget, key: str, page: str | None = None) -> UpstreamCall:
        url = f"{base_of(channel, DEFAULT_BASE)}/v1beta/models"
        if page:
            url += f"?pageToken={quote(page, safe='')}"
        headers = upstream_headers(channel, {"x-goog-api-key": key}, "application/json")
        return UpstreamCall("GET", url, headers, b"")

    def read_models(self, body: bytes) -> ModelPage:
        data = json_object(body)
        models = data.get("models", [])
        if not isinstance(models, list):
            raise UnreadableReply("models: must be an array")
        ids = [str(m["name"]).removeprefix("models/") for m in models
               if isinstance(m, dict) and isinstance(m.get("name"), str)]
        token = data.get("nextPageToken")
        return ModelPage(ids, token if isinstance(token, str) and token else None)

    def test_call(self, channel: ChannelTarget, key: str, model: str, capabilities: Mapping[str, bool]
                  ) -> UpstreamCall:
        """A speech model: one short spoken answer in a built-in voice; an embedding model (`embed` in
        its name): one word to embed; any other: a text answer of one token."""
        method = GENERATE
        if capabilities.get(SPEECH_OUTPUT):
            body: dict[str, Any] = {
                "contents": [{"parts": [{"text": "Say: ok"}]}],
                "generationConfig": {"responseModalities": ["AUDIO"], "speechConfig": {
                    "voiceConfig": {"prebuiltVoiceConfig": {"voiceName": TEST_VOICE}}}}}
        elif "embed" in model.lower():
            method, body = "embedContent", {"content": {"parts": [{"text": "hello"}]}}
        else:
            body = {"contents": [{"parts": [{"text": "hello"}]}], "generationConfig": {"maxOutputTokens": 1}}
        url = f"{base_of(channel, DEFAULT_BASE)}/v1beta/models/{quote(model, safe='')}:{method}"
        headers = upstream_headers(channel, {"x-goog-api-key": key}, "application/json")
        return UpstreamCall("POST", url, headers, json.dumps(body).encode())

    def test_outcome(self, status: int, body: bytes) -> TestOutcome:
        return passed(status, body)

    def balance_query(self, channel: ChannelTarget, key: str, today: Any) -> BalanceQuery | None:
        return None  # Google publishes no balance


GEMINI = Gemini()
