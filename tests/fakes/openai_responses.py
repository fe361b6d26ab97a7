"""The Responses API of the fake OpenAI (`FakeOpenAI`): `POST /v1/responses`, as the real API answers it.

The answer follows the fake's `Text` (tests/fakes/openai_text.py): a message whose one `output_text` part
is `Text.reply`, or, when the request has `tools` and `Text.tool_calls` is set, one `function_call` item
per call. Usage: `Text.usage` (None: `usage: null`; a dict: sent as is), by default input tokens = words
of the input and the instructions + 7, `input_tokens_details.cached_tokens` = `Text.cached`, output tokens
= words of the answer (or a quarter of the arguments' characters), `reasoning_tokens` 0.

Streamed (`stream: true`) as the real API does, one chunk per event, each `event: <type>` + `data:` with a
`sequence_number` from 0: `response.created`, `response.in_progress`; per message `output_item.added`,
`content_part.added`, one `output_text.delta` per word, `output_text.done`, `content_part.done`,
`output_item.done`; per function call `output_item.added`, the arguments in two
`function_call_arguments.delta` halves, `function_call_arguments.done`, `output_item.done`; then
`response.completed` with the whole response and its usage. A body without `model` is OpenAI's 400.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from tests.fakes.base import Recorded, Reply, json_reply
from tests.fakes.openai_text import Text, words

PATH = "/v1/responses"


def _input_words(body: dict[str, Any]) -> int:
    given, total = body.get("input"), 0
    items = [{"content": given}] if isinstance(given, str) else given if isinstance(given, list) else []
    for item in items:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            total += words(content)
        elif isinstance(content, list):
            total += sum(words(p.get("text", "")) for p in content if isinstance(p, dict))
    instructions = body.get("instructions")
    return total + (words(instructions) if isinstance(instructions, str) else 0)


def _usage(text: Text, body: dict[str, Any], output: int) -> dict[str, Any] | None:
    if text.usage is None:
        return None
    if isinstance(text.usage, dict):
        return text.usage
    given = _input_words(body) + 7
    return {"input_tokens": given, "input_tokens_details": {"cached_tokens": text.cached},
            "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": given + output}


def _message(ident: str, reply: str, status: str) -> dict[str, Any]:
    content = [_part(reply)] if status == "completed" else []
    return {"id": ident, "type": "message", "status": status, "role": "assistant", "content": content}


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _call(index: int, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {"id": f"fc_{index}", "type": "function_call", "status": status, "arguments": arguments,
            "call_id": f"call_{index}", "name": name}


def _response(body: dict[str, Any], ident: str, created: int, status: str, output: list[dict[str, Any]],
              usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": ident, "object": "response", "created_at": created, "status": status, "background": False,
            "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"), "model": body.get("model", ""),
            "output": output, "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": True, "temperature": 1.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": body.get("tools") or [],
            "top_p": 1.0, "truncation": "disabled", "usage": usage, "user": None, "metadata": {}}


def responses(text: Text, request: Recorded) -> Reply:
    body = request.json
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return json_reply(400, {"error": {"message": "Missing required parameter: 'model'.",
                                          "type": "invalid_request_error", "param": "model",
                                          "code": "missing_required_parameter"}})
    tools = bool(body.get("tools")) and bool(text.tool_calls)
    calls = [(name, json.dumps(args, separators=(",", ":"))) for name, args in text.tool_calls]
    calls = calls if tools else []
    output_tokens = sum(len(a) // 4 for _, a in calls) if tools else words(text.reply)
    usage = _usage(text, body, output_tokens)
    ident, message_id = f"resp_{secrets.token_hex(8)}", f"msg_{secrets.token_hex(8)}"
    created = int(time.time())
    done = ([_call(i, name, arguments, "completed") for i, (name, arguments) in enumerate(calls)] if tools
            else [_message(message_id, text.reply, "completed")])
    if not body.get("stream"):
        return json_reply(200, _response(body, ident, created, "completed", done, usage))

    chunks: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(chunks), **fields}
        chunks.append(f"event: {kind}\ndata: ".encode() + json.dumps(data).encode() + text.separator)

    event("response.created", response=_response(body, ident, created, "in_progress", [], None))
    event("response.in_progress", response=_response(body, ident, created, "in_progress", [], None))
    if tools:
        for i, (name, arguments) in enumerate(calls):
            event("response.output_item.added", output_index=i, item=_call(i, name, "", "in_progress"))
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                event("response.function_call_arguments.delta", item_id=f"fc_{i}", output_index=i,
                      delta=piece)
            event("response.function_call_arguments.done", item_id=f"fc_{i}", output_index=i, name=name,
                  arguments=arguments)
            event("response.output_item.done", output_index=i, item=done[i])
    else:
        place = {"item_id": message_id, "output_index": 0, "content_index": 0}
        event("response.output_item.added", output_index=0, item=_message(message_id, "", "in_progress"))
        event("response.content_part.added", **place, part=_part(""))
        for i, piece in enumerate(text.reply.split(" ")):
            event("response.output_text.delta", **place, delta=(" " if i else "") + piece, logprobs=[])
        event("response.output_text.done", **place, text=text.reply, logprobs=[])
        event("response.content_part.done", **place, part=_part(text.reply))
        event("response.output_item.done", output_index=0, item=done[0])
    event("response.completed", response=_response(body, ident, created, "completed", done, usage))
    return Reply(200, content_type="text/event-stream", chunks=chunks)
