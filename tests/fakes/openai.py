"""A fake OpenAI API (moderations, models; chat completions and embeddings in `openai_text.py`, responses in
`openai_responses.py`) on a real socket, for the gateway's end-to-end tests.

- `POST /v1/moderations` — `{"input": str | [str] | [parts], "model"?}`: one result per string, ONE
  result for a list of parts (text / image_url), as the real API does. Each result has the 13 categories
  of omni-moderation in `categories`, `category_scores` and `category_applied_input_types`. Deterministic:
  an input with a word starting with "kill" (any case) is flagged for violence (score 0.9); everything else
  is not flagged, with small scores.
- `GET /v1/models`, `GET /v1/models/{id}` from `models`.
- The balance endpoints of OpenAI and of the OpenAI-compatible providers whose balance Tollway reads, all
  telling `balance` (spent: `used`): OpenAI's `GET /v1/dashboard/billing/subscription` (`hard_limit_usd`
  = balance + used) and `GET /v1/dashboard/billing/usage` (`total_usage` = used, in cents); OpenRouter's
  `GET /v1/credits`; Moonshot's `GET /v1/users/me/balance`; SiliconFlow's `GET /v1/user/info`;
  DeepSeek's `GET /user/balance` (in `balance_currency`). Each in that provider's own format.
- Anything else is OpenAI's 404 `Invalid URL (METHOD /path)`.

Errors are OpenAI's `{"error": {"message", "type", "param", "code"}}`. With `valid_keys` set, another
`Authorization: Bearer` key is the real 401 `invalid_api_key`, and no key the real 401 without a code.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from typing import Any

from tests.fakes.base import FakeServer, Recorded, Reply, json_reply
from tests.fakes.openai_responses import responses
from tests.fakes.openai_text import Text, chat, embeddings, text_path

DEFAULT_MODELS = ("omni-moderation-latest", "text-moderation-latest")
DEFAULT_MODERATION_MODEL = "omni-moderation-latest"

CATEGORIES = (
    "harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent",
    "self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors", "violence",
    "violence/graphic",
)
TEXT_ONLY = frozenset({"harassment", "harassment/threatening", "hate", "hate/threatening", "illicit",
                       "illicit/violent", "sexual/minors"})
"""Categories only ever judged on text; the six others are judged on text and images."""

FLAG_SCORE = 0.9
NO_KEY_MESSAGE = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
    "auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're "
    "accessing the API from your browser and are prompted for a username and password. You can obtain an API "
    "key from https://platform.openai.com/account/api-keys.")
NOT_JSON_MESSAGE = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you "
    "have trouble figuring out how to fix this, please contact us through our help center at "
    "help.openai.com.)")
_KILL = re.compile(r"\bkill", re.IGNORECASE)
BALANCE_PATHS = {  # path → the method that answers it
    "/v1/dashboard/billing/subscription": "_subscription", "/v1/dashboard/billing/usage": "_usage",
    "/v1/credits": "_credits", "/v1/users/me/balance": "_moonshot", "/v1/user/info": "_siliconflow",
    "/user/balance": "_deepseek"}


def openai_error(status: int, message: str, type_: str, code: str | None = None,
                 param: str | None = None) -> Reply:
    """A reply in OpenAI's error format."""
    return json_reply(status, {"error": {"message": message, "type": type_, "param": param, "code": code}})


def _masked(key: str) -> str:
    return f"{key[:3]}{'*' * max(len(key) - 7, 0)}{key[-4:]}" if len(key) > 8 else "*" * len(key)


ERRORS: dict[str, tuple[int, str, str, str | None]] = {
    "400": (400, "Invalid request (injected by the fake).", "invalid_request_error", None),
    "403": (403, "Country, region, or territory not supported", "request_forbidden",
            "unsupported_country_region_territory"),
    "429": (429, "Rate limit reached for omni-moderation-latest in organization org-fake on requests per min "
            "(RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.", "requests",
            "rate_limit_exceeded"),
    "500": (500, "The server had an error while processing your request. Sorry about that!", "server_error",
            None),
}


class _Item:
    """One moderated input: its text (joined) and whether it had images."""

    def __init__(self, text: str, has_text: bool, has_image: bool) -> None:
        self.text, self.has_text, self.has_image = text, has_text, has_image


def moderation_result(text: str, *, has_text: bool = True, has_image: bool = False) -> dict[str, Any]:
    """The result the fake gives for one input item."""
    violent = bool(_KILL.search(text))
    scores = {name: round(0.0001 * (i + 1), 6) for i, name in enumerate(CATEGORIES)}
    if violent:
        scores["violence"] = FLAG_SCORE
    categories = {name: score >= 0.5 for name, score in scores.items()}
    text_types = ["text"] if has_text else []
    applied = {name: text_types if name in TEXT_ONLY else text_types + (["image"] if has_image else [])
               for name in CATEGORIES}
    return {"flagged": any(categories.values()), "categories": categories, "category_scores": scores,
            "category_applied_input_types": applied}


class FakeOpenAI(FakeServer):
    """Fake OpenAI. Attributes may be changed while it runs; they apply to the next request."""

    def __init__(self, *, models: Iterable[str] = DEFAULT_MODELS, valid_keys: Iterable[str] | None = None,
                 slow_seconds: float = 5.0, chunk_delay: float = 0.01) -> None:
        super().__init__(valid_keys=valid_keys, slow_seconds=slow_seconds, chunk_delay=chunk_delay)
        self.models = list(models)
        self.balance = 100.0
        """What every balance endpoint tells (in USD, or in CNY where the provider counts in yuan)."""
        self.used = 20.0
        self.balance_currency = "CNY"
        self.text = Text()
        """What chat completions, embeddings and responses answer (tests/fakes/openai_text.py)."""
        """The currency of DeepSeek's balance entry."""

    # -- hooks ------------------------------------------------------------------------------------------

    def reply_headers(self) -> dict[str, str]:
        return {"x-request-id": f"req_{secrets.token_hex(16)}", "openai-version": "2020-10-01"}

    def api_key(self, request: Recorded) -> str | None:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        return (key.strip() or None) if scheme.lower() == "bearer" else None

    def key_error(self, request: Recorded, key: str | None) -> Reply:
        if key is None:
            return openai_error(401, NO_KEY_MESSAGE, "invalid_request_error")
        message = (f"Incorrect API key provided: {_masked(key)}. You can find your API key at "
                   "https://platform.openai.com/account/api-keys.")
        return openai_error(401, self.echoed(message, request), "invalid_request_error", "invalid_api_key")

    def error_reply(self, mode: str, request: Recorded) -> Reply:
        if mode == "401":
            return self.key_error(request, self.api_key(request) or "sk-fake-bad-key")
        status, message, type_, code = ERRORS[mode]
        return openai_error(status, self.echoed(message, request), type_, code)

    def route(self, request: Recorded) -> Reply:
        path = request.path.rstrip("/")
        kind = text_path(path) if request.method == "POST" else None
        if kind is not None:
            return chat(self.text, request) if kind == "chat/completions" else embeddings(self.text, request)
        if request.method == "POST" and path == "/v1/responses":
            return responses(self.text, request)
        if request.method == "POST" and path == "/v1/moderations":
            return self._moderate(request)
        if request.method == "GET" and path == "/v1/models":
            return json_reply(200, {"object": "list", "data": [self._model_view(m) for m in self.models]})
        if request.method == "GET" and path in BALANCE_PATHS:
            return json_reply(200, getattr(self, BALANCE_PATHS[path])())
        if request.method == "GET" and path.startswith("/v1/models/"):
            model = path.removeprefix("/v1/models/")
            if model in self.models:
                return json_reply(200, self._model_view(model))
            return openai_error(404, f"The model '{model}' does not exist", "invalid_request_error",
                                "model_not_found", "model")
        return openai_error(404, f"Invalid URL ({request.method} {request.path})", "invalid_request_error")

    # -- endpoints --------------------------------------------------------------------------------------

    def _subscription(self) -> dict[str, Any]:
        return {"object": "billing_subscription", "has_payment_method": True,
                "hard_limit_usd": self.balance + self.used, "soft_limit_usd": self.balance + self.used,
                "system_hard_limit_usd": self.balance + self.used, "access_until": 0}

    def _usage(self) -> dict[str, Any]:
        return {"object": "list", "daily_costs": [], "total_usage": self.used * 100}

    def _credits(self) -> dict[str, Any]:
        return {"data": {"total_credits": self.balance + self.used, "total_usage": self.used}}

    def _moonshot(self) -> dict[str, Any]:
        return {"code": 0, "data": {"available_balance": self.balance, "voucher_balance": 0,
                                    "cash_balance": self.balance}, "scode": "0x0", "status": True}

    def _siliconflow(self) -> dict[str, Any]:
        return {"code": 20000, "message": "OK", "status": True,
                "data": {"id": "u-fake", "name": "fake", "balance": f"{self.balance:.4f}",
                         "chargeBalance": "0.0000", "totalBalance": f"{self.balance:.4f}"}}

    def _deepseek(self) -> dict[str, Any]:
        amount = f"{self.balance:.2f}"
        return {"is_available": self.balance > 0, "balance_infos": [
            {"currency": self.balance_currency, "total_balance": amount, "granted_balance": "0.00",
             "topped_up_balance": amount}]}

    @staticmethod
    def _model_view(model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": 1700000000, "owned_by": "openai"}

    def _moderate(self, request: Recorded) -> Reply:
        body = request.json
        if not isinstance(body, dict):
            return openai_error(400, NOT_JSON_MESSAGE, "invalid_request_error")
        model = body.get("model", DEFAULT_MODERATION_MODEL)
        if not isinstance(model, str):
            return openai_error(400, "Invalid type for 'model': expected a string.", "invalid_request_error",
                                "invalid_type", "model")
        items = _items(body.get("input"))
        if isinstance(items, Reply):
            return items
        if model.startswith("text-moderation") and any(item.has_image for item in items):
            return openai_error(400, f"Model {model} does not support image inputs.", "invalid_request_error",
                                None, "input")
        results = [moderation_result(i.text, has_text=i.has_text, has_image=i.has_image) for i in items]
        return json_reply(200, {"id": f"modr-{secrets.token_hex(12)}", "model": model, "results": results})


def _bad_input(message: str) -> Reply:
    return openai_error(400, message, "invalid_request_error", None, "input")


def _items(value: Any) -> list[_Item] | Reply:
    """The items a moderation input stands for, or the 400 the real API gives for it."""
    if value is None:
        return _bad_input("Missing required parameter: 'input'.")
    if isinstance(value, str):
        return [_Item(value, True, False)]
    if not isinstance(value, list) or not value:
        return _bad_input("Invalid value for 'input': expected a string or a non-empty array.")
    if all(isinstance(v, str) for v in value):
        return [_Item(v, True, False) for v in value]
    if not all(isinstance(v, dict) for v in value):
        return _bad_input("Invalid value for 'input': an array must hold only strings or only content parts.")
    texts, images = [], 0
    for index, part in enumerate(value):
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif (part.get("type") == "image_url" and isinstance(part.get("image_url"), dict)
              and isinstance(part["image_url"].get("url"), str)):
            images += 1
        else:
            return _bad_input(f"Invalid value for 'input[{index}]': expected a text or image_url part.")
    return [_Item(" ".join(texts), bool(texts), images > 0)]
