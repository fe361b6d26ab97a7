"""A fake Google Gemini API (generativelanguage v1beta) on a real socket, for the gateway's end-to-end tests.

It answers what the gateway's Gemini channels call, in Gemini's own wire format:

- `POST /v1beta/models/{model}:generateContent` — audio (16-bit little-endian PCM at 24 kHz, base64) when
  `generationConfig.responseModalities` asks for AUDIO, text otherwise (`gemini_text.py`, set by `text`);
  `usageMetadata` with promptTokenCount = the number of whitespace-separated words of every
  `contents[].parts[].text` (at least 1, see `prompt_tokens`) and candidatesTokenCount = `audio_tokens`
  (audio) or the words of `text_reply`.
- `POST …:streamGenerateContent?alt=sse` — events `data: {json}\\r\\n\\r\\n` (`stream_chunks` of audio, one
  per word of text), each with a slice of the answer and the cumulative usage (the last one has the final
  counts and `finishReason`); without `alt=sse`, the same chunks as a streamed JSON array
  `[chunk,\\r\\nchunk]`.
- `POST …:embedContent`, `POST …:batchEmbedContents` — embeddings (`gemini_text.py`).
- `POST /v1beta/openai/chat/completions`, `POST /v1beta/openai/embeddings` — Google's OpenAI-compatible
  endpoint, in OpenAI's wire format (the fake OpenAI's code, `openai_text.py`, answering from `openai`),
  key as `Authorization: Bearer`.
- `GET /v1beta/models` (paged with `pageSize`, default `page_size`, and `pageToken`),
  `GET /v1beta/models/{id}`.
- Anything else is a Google 404. Errors are Google's `{"error": {"code", "message", "status", "details"}}`.

The key is read from `x-goog-api-key` or `?key=`. With `valid_keys` set, another key gets the real bad-key
answer (400 INVALID_ARGUMENT, reason API_KEY_INVALID) and no key at all the real 403 PERMISSION_DENIED.
"""

from __future__ import annotations

import base64
import json
import math
import re
import secrets
import struct
from collections.abc import Iterable
from typing import Any, ClassVar

from tests.fakes.base import BASE_FAILURES, FakeServer, Recorded, Reply, json_reply
from tests.fakes.gemini_text import BadEmbed, GeminiText, embed_answer, prompt_tokens, text_chunks
from tests.fakes.openai_text import Text, chat, embeddings, text_path

__all__ = ["FakeGemini", "GeminiText", "google_error", "pcm_audio", "prompt_tokens"]

DEFAULT_MODELS = ("gemini-2.5-flash-preview-tts", "gemini-2.5-pro-preview-tts", "gemini-2.5-flash")
AUDIO_MIME = "audio/L16;codec=pcm;rate=24000"
SAMPLE_RATE = 24000
SAMPLES_PER_TOKEN = 48
JSON_TYPE = "application/json; charset=UTF-8"

_GENERATE = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>generateContent"
                       r"|streamGenerateContent)$")
_EMBED = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>embedContent"
                    r"|batchEmbedContents)$")
OPENAI_PREFIX = "/v1beta/openai/"
_LIST = re.compile(r"^/v1(?:beta|alpha)?/models/?$")
_GET = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+)$")

BAD_KEY_MESSAGE = "API key not valid. Please pass a valid API key."
NO_KEY_MESSAGE = ("Method doesn't allow unregistered callers (callers without established identity). Please "
                  "use API Key or other form of API consumer identity to call this API.")


def _key_invalid_details() -> list[dict[str, Any]]:
    return [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
         "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}},
        {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US",
         "message": BAD_KEY_MESSAGE},
    ]


def google_error(code: int, status: str, message: str, details: list[dict[str, Any]] | None = None) -> Reply:
    """A reply in Google's error format."""
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return json_reply(code, {"error": error}, content_type=JSON_TYPE)


ERRORS: dict[str, tuple[int, str, str, list[dict[str, Any]] | None]] = {
    "bad_key": (400, "INVALID_ARGUMENT", BAD_KEY_MESSAGE, _key_invalid_details()),
    "400": (400, "INVALID_ARGUMENT", "Request contains an invalid argument.", None),
    "401": (401, "UNAUTHENTICATED", BAD_KEY_MESSAGE, _key_invalid_details()[:1]),
    "403": (403, "PERMISSION_DENIED", "The caller does not have permission", None),
    "429": (429, "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details. For more "
            "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
            [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                 "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
             {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}]),
    "500": (500, "INTERNAL", "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting", None),
}


def pcm_audio(samples: int) -> bytes:
    """`samples` of a 440 Hz sine, 16-bit little-endian at 24 kHz."""
    values = (int(8000 * math.sin(2 * math.pi * 440 * i / SAMPLE_RATE)) for i in range(samples))
    return struct.pack(f"<{samples}h", *values)


def wants_audio(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    config = body.get("generationConfig") or body.get("generation_config")
    if not isinstance(config, dict):
        return False
    modalities = config.get("responseModalities") or config.get("response_modalities") or []
    return isinstance(modalities, list) and any(str(m).upper() == "AUDIO" for m in modalities)


class FakeGemini(FakeServer):
    """Fake Gemini. Attributes may be changed while it runs; they apply to the next request."""

    failure_modes: ClassVar[frozenset[str]] = BASE_FAILURES | {"bad_key"}

    def __init__(self, *, models: Iterable[str] = DEFAULT_MODELS, audio_tokens: int = 500,
                 stream_chunks: int = 3, page_size: int = 2, text_reply: str = "Hello from the fake Gemini.",
                 strict_models: bool = False, valid_keys: Iterable[str] | None = None,
                 slow_seconds: float = 5.0, chunk_delay: float = 0.01) -> None:
        super().__init__(valid_keys=valid_keys, slow_seconds=slow_seconds, chunk_delay=chunk_delay)
        self.models = [m.removeprefix("models/") for m in models]
        self.audio_tokens = audio_tokens
        self.stream_chunks = stream_chunks
        self.page_size = page_size
        self.text = GeminiText(reply=text_reply)
        """What text and embedding answers hold (`gemini_text.GeminiText`)."""
        self.openai = Text(reply=text_reply)
        """What the OpenAI-compatible endpoint answers (`openai_text.Text`)."""
        self.strict_models = strict_models
        """When True, generating with a model not in `models` is Google's 404 NOT_FOUND."""

    @property
    def text_reply(self) -> str:
        """The text answer (`text.reply`)."""
        return self.text.reply

    @text_reply.setter
    def text_reply(self, reply: str) -> None:
        self.text.reply = reply

    # -- hooks ------------------------------------------------------------------------------------------

    def api_key(self, request: Recorded) -> str | None:
        if request.path.startswith(OPENAI_PREFIX):
            scheme, _, key = request.headers.get("authorization", "").partition(" ")
            return (key.strip() or None) if scheme.lower() == "bearer" else None
        return request.headers.get("x-goog-api-key") or request.query.get("key")

    def key_error(self, request: Recorded, key: str | None) -> Reply:
        if key is None:
            return google_error(403, "PERMISSION_DENIED", NO_KEY_MESSAGE)
        return self.error_reply("bad_key", request)

    def error_reply(self, mode: str, request: Recorded) -> Reply:
        code, status, message, details = ERRORS[mode]
        return google_error(code, status, self.echoed(message, request), details)

    def route(self, request: Recorded) -> Reply:
        kind = text_path(request.path) if request.method == "POST" else None
        if kind is not None and request.path.startswith(OPENAI_PREFIX):
            answer = chat if kind == "chat/completions" else embeddings
            return answer(self.openai, request)
        if request.method == "POST" and (match := _GENERATE.match(request.path)):
            return self._generate(request, match["model"], stream=match["method"] == "streamGenerateContent")
        if request.method == "POST" and (match := _EMBED.match(request.path)):
            return self._embed(request, match["model"], batch=match["method"] == "batchEmbedContents")
        if request.method == "GET" and _LIST.match(request.path):
            return self._list(request)
        if request.method == "GET" and (match := _GET.match(request.path)):
            if match["model"] not in self.models:
                return self._model_not_found(match["model"])
            return json_reply(200, self._model_view(match["model"]), content_type=JSON_TYPE)
        return google_error(404, "NOT_FOUND", "Method not found.")

    # -- generation -------------------------------------------------------------------------------------

    def _model_not_found(self, model: str) -> Reply:
        return google_error(404, "NOT_FOUND", f"models/{model} is not found for API version v1beta, or is "
                            "not supported for generateContent. Call ListModels to see the list of "
                            "available models and their supported methods.")

    def _generate(self, request: Recorded, model: str, *, stream: bool) -> Reply:
        body = request.json
        if not isinstance(body, dict):
            return google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        if not isinstance(body.get("contents"), list) or not body["contents"]:
            return google_error(400, "INVALID_ARGUMENT",
                                "* GenerateContentRequest.contents: contents is not specified\n")
        if self.strict_models and model not in self.models:
            return self._model_not_found(model)
        chunks = self.chunks(body, model, stream=stream)
        if not stream:
            return json_reply(200, chunks[0], content_type=JSON_TYPE)
        encoded = [json.dumps(chunk).encode() for chunk in chunks]
        if request.query.get("alt") == "sse":
            return Reply(200, content_type="text/event-stream",
                         chunks=[b"data: " + c + b"\r\n\r\n" for c in encoded])
        pieces = [(b"[" if i == 0 else b",\r\n") + c for i, c in enumerate(encoded)]
        pieces[-1] += b"]"
        return Reply(200, content_type=JSON_TYPE, chunks=pieces)

    def _embed(self, request: Recorded, model: str, *, batch: bool) -> Reply:
        if self.strict_models and model not in self.models:
            return self._model_not_found(model)
        try:
            return json_reply(200, embed_answer(self.text, request.json, batch=batch), content_type=JSON_TYPE)
        except BadEmbed as bad:
            return google_error(400, "INVALID_ARGUMENT", str(bad))

    def chunks(self, body: dict[str, Any], model: str, *, stream: bool) -> list[dict[str, Any]]:
        """The answer to `body`: one response, or (streamed) `stream_chunks` of audio or one per word of
        text."""
        response_id = secrets.token_urlsafe(16)
        if not wants_audio(body):
            return text_chunks(self.text, body, model, response_id, stream=stream)
        prompt = prompt_tokens(body)
        count = max(1, self.stream_chunks) if stream else 1
        total, modality = self.audio_tokens, "AUDIO"
        samples = total * SAMPLES_PER_TOKEN
        pcm = pcm_audio(samples)
        parts: list[dict[str, Any]] = []
        for i in range(count):
            piece = pcm[2 * (samples * i // count): 2 * (samples * (i + 1) // count)]
            data = base64.b64encode(piece).decode()
            parts.append({"inlineData": {"mimeType": AUDIO_MIME, "data": data}})
        out = []
        for i, part in enumerate(parts):
            candidates = total * (i + 1) // count
            usage: dict[str, Any] = {"promptTokenCount": prompt, "totalTokenCount": prompt + candidates,
                                     "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
            if candidates:  # proto3 JSON leaves zero counts out
                usage["candidatesTokenCount"] = candidates
                usage["candidatesTokensDetails"] = [{"modality": modality, "tokenCount": candidates}]
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
            if i == count - 1:
                candidate["finishReason"] = "STOP"
                candidate["safetyRatings"] = []
            out.append({"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
                        "responseId": response_id})
        return out

    # -- models -----------------------------------------------------------------------------------------

    def _model_view(self, model: str) -> dict[str, Any]:
        return {"name": f"models/{model}", "version": "001",
                "displayName": model.replace("-", " ").title().replace("Tts", "TTS"),
                "description": f"Fake {model}", "inputTokenLimit": 8192, "outputTokenLimit": 16384,
                "supportedGenerationMethods": ["generateContent"]}

    def _list(self, request: Recorded) -> Reply:
        raw_size = request.query.get("pageSize", "")
        if raw_size and not raw_size.lstrip("-").isdigit():
            return google_error(400, "INVALID_ARGUMENT", f'Invalid value at \'page_size\' (TYPE_INT32), '
                                f'"{raw_size}"')
        size = int(raw_size) if raw_size else 0
        if size < 0:
            return google_error(400, "INVALID_ARGUMENT", "page_size must be non-negative")
        size = size or self.page_size
        start = 0
        if token := request.query.get("pageToken"):
            try:
                start = int(base64.urlsafe_b64decode(token.encode()).decode().removeprefix("offset:"))
            except ValueError:
                return google_error(400, "INVALID_ARGUMENT", "Invalid page token.")
        page: dict[str, Any] = {"models": [self._model_view(m) for m in self.models[start: start + size]]}
        if start + size < len(self.models):
            page["nextPageToken"] = base64.urlsafe_b64encode(f"offset:{start + size}".encode()).decode()
        return json_reply(200, page, content_type=JSON_TYPE)
