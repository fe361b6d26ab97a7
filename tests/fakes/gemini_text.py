"""Text generation and embeddings of the fake Gemini (`FakeGemini`), as the real API answers them.

- generateContent without AUDIO: one candidate whose parts hold `GeminiText.reply`; `usageMetadata` with
  promptTokenCount (`GeminiText.prompt`, else the words of every `contents[].parts[].text`, at least 1),
  candidatesTokenCount (the words of the answer), thoughtsTokenCount, cachedContentTokenCount and
  toolUsePromptTokenCount when configured (proto3 JSON leaves zero counts out), totalTokenCount the sum.
- streamGenerateContent: one response per word of the answer, each with the cumulative usage (thoughts,
  cache and prompt counts from the first; the last one has the final counts and `finishReason`).
- embedContent (`{"content"}`): `{"embedding": {"values"}}`; batchEmbedContents (`{"requests": [...]}`):
  `{"embeddings": [{"values"}, ...]}`, one per request. `GeminiText.dimensions` floats, deterministic.
  `usageMetadata` (promptTokenCount = the words of the parts) only when `GeminiText.embed_usage` is set:
  the real API often sends none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass
class GeminiText:
    """What the fake's text and embedding answers hold; change it while the fake runs."""

    reply: str = "Hello from the fake Gemini."
    prompt: int | None = None  # promptTokenCount; None: the words of the contents
    thoughts: int = 0  # thoughtsTokenCount
    cached: int = 0  # cachedContentTokenCount (part of promptTokenCount, as Google counts it)
    tool_use: int = 0  # toolUsePromptTokenCount
    usage: bool = True  # False: no usageMetadata on generated text
    embed_usage: bool = False  # usageMetadata on embeddings
    dimensions: int = 4


class BadEmbed(ValueError):
    """An embedding body the real API refuses (400 INVALID_ARGUMENT, with this message)."""


def words_of_parts(content: Any) -> int:
    parts = content.get("parts") if isinstance(content, dict) else None
    return sum(len(p["text"].split()) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
               ) if isinstance(parts, list) else 0


def prompt_tokens(body: Any) -> int:
    """The promptTokenCount the fake reports for a request body: words of all contents' texts, at least 1."""
    contents = body.get("contents") if isinstance(body, dict) else None
    return max(sum(words_of_parts(c) for c in contents) if isinstance(contents, list) else 0, 1)


def split_words(text: str) -> list[str]:
    """`text` cut after each word (its following spaces kept): the pieces join back to `text`."""
    return re.findall(r"\s*\S+\s*", text) if text.strip() else [text]


def text_chunks(text: GeminiText, body: dict[str, Any], model: str, response_id: str, *, stream: bool
                ) -> list[dict[str, Any]]:
    """The text answer to `body`: one response, or (streamed) one per word."""
    pieces = split_words(text.reply) if stream else [text.reply]
    prompt = prompt_tokens(body) if text.prompt is None else text.prompt
    words = len(text.reply.split())
    out = []
    for i, piece in enumerate(pieces):
        candidates = words * (i + 1) // len(pieces)
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}
        if i == len(pieces) - 1:
            candidate["finishReason"] = "STOP"
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": response_id}
        if text.usage:
            chunk["usageMetadata"] = _usage(text, prompt, candidates)
        out.append(chunk)
    return out


def _usage(text: GeminiText, prompt: int, candidates: int) -> dict[str, Any]:
    usage: dict[str, Any] = {"promptTokenCount": prompt}
    counts = (("candidatesTokenCount", candidates), ("cachedContentTokenCount", text.cached),
              ("toolUsePromptTokenCount", text.tool_use), ("thoughtsTokenCount", text.thoughts))
    usage.update((name, value) for name, value in counts if value)  # proto3 JSON leaves zero counts out
    usage["totalTokenCount"] = prompt + candidates + text.tool_use + text.thoughts
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
    if text.cached:
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": text.cached}]
    if candidates:
        usage["candidatesTokensDetails"] = [{"modality": "TEXT", "tokenCount": candidates}]
    return usage


def _values(seed: str, dimensions: int) -> list[float]:
    base = sum(seed.encode()) % 97
    return [round(((base + i * 13) % 100) / 100 - 0.5, 4) for i in range(dimensions)]


def _embedding(text: GeminiText, content: Any, label: str) -> dict[str, Any]:
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list) or not content["parts"]:
        raise BadEmbed(f"* {label}: content is not specified\n")
    return {"values": _values(json.dumps(content, sort_keys=True), text.dimensions)}


def embed_answer(text: GeminiText, body: Any, *, batch: bool) -> dict[str, Any]:
    """The answer to an embedContent (`batch` False) or batchEmbedContents body; `BadEmbed` if invalid."""
    if not isinstance(body, dict):
        raise BadEmbed("Invalid JSON payload received.")
    if not batch:
        answer: dict[str, Any] = {"embedding": _embedding(text, body.get("content"), "EmbedContentRequest")}
        words = words_of_parts(body["content"])
    else:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise BadEmbed("* BatchEmbedContentsRequest.requests: requests is not specified\n")
        answer = {"embeddings": [_embedding(text, r.get("content") if isinstance(r, dict) else None,
                                            f"BatchEmbedContentsRequest.requests[{i}]")
                                 for i, r in enumerate(requests)]}
        words = sum(words_of_parts(r["content"]) for r in requests)
    if text.embed_usage:
        answer["usageMetadata"] = {"promptTokenCount": words, "totalTokenCount": words}
    return answer
