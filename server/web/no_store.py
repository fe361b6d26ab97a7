"""Replies that carry a secret are never stored: `Cache-Control: no-store`, declared once per route.

An access token, a whole API key, a channel key, a 2FA secret and its backup codes, redemption codes: a
reply showing one must not stay in the browser's cache (a shared computer, the back button) or in any
cache between us and the user. What is secret is marked where the reply is declared — the `Secret` type
on a reply model's field (`key: Secret`), or as the reply itself (`reply=Secret`, `reply=list[Secret]`)
— and the route says `secret=True` (server/web/routing.py); the guard then puts `NO_STORE` on every
answer of that route, errors included (server/auth/guard.py `Guard.finish`). `tests/test_no_store.py`
checks over the whole route table that a route is flagged exactly when its reply carries a `Secret`
(`carries_secret`), so a new route showing a marked field cannot forget the flag. The session cookie is
a secret too: whatever reply sets it says `no-store` (server/auth/cookies.py).

The mark changes nothing in validation or serialization; the API document shows it as `x-secret` on the
field, and the route as `x-no-store`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
"""The headers of a reply that carries a secret (`Pragma` for HTTP/1.0 caches)."""


@dataclass(frozen=True, slots=True)
class SecretMark:
    """The `Annotated` marker of a secret value in a reply (see the module docstring)."""

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        generated = handler(schema)
        generated["x-secret"] = True
        return generated


Secret = Annotated[str, SecretMark()]


def carries_secret(declared: Any) -> bool:
    """Whether a declared reply type holds a `Secret` anywhere: itself, inside a list, union or dict, in a
    field of a model, or in the argument of a generic model (`Paged[TokenView]`)."""
    seen: set[int] = set()

    def walk(node: Any) -> bool:
        if id(node) in seen:
            return False
        seen.add(id(node))
        if get_origin(node) is Annotated:
            base, *metadata = get_args(node)
            return any(isinstance(m, SecretMark) for m in metadata) or walk(base)
        if isinstance(node, type) and issubclass(node, BaseModel):
            generic = node.__pydantic_generic_metadata__
            if any(walk(arg) for arg in generic["args"]):
                return True
            return any(any(isinstance(m, SecretMark) for m in info.metadata) or walk(info.annotation)
                       for info in node.model_fields.values())
        return any(walk(arg) for arg in get_args(node))

    return walk(declared)
