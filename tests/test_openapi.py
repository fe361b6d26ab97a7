"""The API document: every route declares its schemas, the document generated from the route table is a
valid OpenAPI 3.1 document that lists every route with its access level, and it is served at
`/api/openapi.json` (with a readable page at `/api/docs`). Also the one translation of a validation
failure into a 400 naming the field, and that each reply shape a route declares is declared once: its model,
built only by its own `of()`, with no dict copy of it in its domain."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Annotated, Any, get_args

import pytest
from openapi_spec_validator import validate
from pydantic import BaseModel, ValidationError
from sanic import Blueprint
from sanic.response import text

import server
from server.app import create_app
from server.web.access import Access, Wire
from server.web.openapi import document, openapi_path
from server.web.schema import Bool, Int64, IntRule, Schema, Str, message_of
from tests.harness import Running, make_config

# actions named by their path (and query): nothing to send
TAKE_NO_BODY = {("POST", "/api/token/<token_id>/key"), ("POST", "/api/channel/<channel_id>/key"),
                ("POST", "/api/channel/copy/<channel_id>"), ("POST", "/api/channel/fix"),
                ("POST", "/api/user/passkey/register/begin"), ("POST", "/api/user/passkey/login/begin"),
                ("POST", "/api/user/passkey/verify/begin"), ("POST", "/api/user/2fa/setup")}


def app_for(tmp_path: Any, name: str) -> Any:
    return create_app(make_config("sqlite+aiosqlite:///:memory:", tmp_path), name=name)


def operations(app: Any) -> list[tuple[str, str, Any]]:
    return sorted((method, r.ctx.path_template if getattr(r.ctx, "declared", False) else "/" + r.path, r.ctx)
                  for r in app.router.routes for method in r.methods)


def test_every_route_declares_its_schemas(tmp_path: Any) -> None:
    missing = []
    for method, path, ctx in operations(app_for(tmp_path, "schemas_declared")):
        if not getattr(ctx, "declared", False):
            missing.append(f"{method} {path}: not registered with route(...)")
            continue
        if not ctx.summary:
            missing.append(f"{method} {path}: no summary (the handler's docstring)")
        if method in ("POST", "PUT", "PATCH") and ctx.body is None and (method, path) not in TAKE_NO_BODY:
            missing.append(f"{method} {path}: no body schema")
        if re.search(r"<[^>]+>", path) and ctx.path is None:
            missing.append(f"{method} {path}: no path parameter schema")
    assert not missing, "\n".join(missing)


def test_a_route_registered_without_route_is_reported(tmp_path: Any) -> None:
    app = app_for(tmp_path, "schemas_undeclared")
    bp = Blueprint("bare")

    @bp.get("/api/bare")
    async def bare(request: Any) -> Any:
        return text("no schemas")

    app.blueprint(bp)
    undeclared = [(m, p) for m, p, ctx in operations(app) if not getattr(ctx, "declared", False)]
    assert undeclared == [("GET", "/api/bare")]


def test_the_document_is_valid_openapi_and_lists_every_route(tmp_path: Any) -> None:
    app = app_for(tmp_path, "schemas_document")
    doc = document(app)
    validate(doc)
    assert doc["openapi"] == "3.1.0"
    listed = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    registered = {(m, openapi_path(p)) for m, p, _ in operations(app)}
    assert listed == registered
    for method, path, ctx in operations(app):
        op = doc["paths"][openapi_path(path)][method.lower()]
        assert op["x-access"] == ctx.access.name.lower()
        assert op["summary"] and op["description"]
        assert "200" in op["responses"] and "4XX" in op["responses"]
        assert ("502" in op["responses"]) == ctx.calls_upstream  # only routes that call a provider
        security = {name for way in op["security"] for name in way}
        if ctx.access is Access.PUBLIC:
            assert op["security"] == []
        elif ctx.access is Access.API_KEY:
            assert "apiKey" in security
            assert ("googApiKey" in security) == path.startswith(("/v1beta/", "/v1/models/"))
            assert ("anthropicKey" in security) == (path.startswith("/v1/messages") or path == "/v1/models")
        elif ctx.session_only:  # an access token is refused: only the session is documented
            assert security == {"session", "newApiUser"}
        else:
            assert {"session", "newApiUser", "accessToken"} <= security
        error = op["responses"]["4XX"]["content"]["application/json"]["schema"]
        refs = [e["$ref"].rsplit("/", 1)[1] for e in error.get("anyOf", [error])]
        expected = {"/v1/models": ["OpenAIError", "AnthropicError"], "/v1/moderations": ["OpenAIError"],
                    "/v1/messages": ["AnthropicError"], "/v1/messages/count_tokens": ["AnthropicError"],
                    "/v1/chat/completions": ["OpenAIError"], "/v1/embeddings": ["OpenAIError"],
                    "/v1/responses": ["OpenAIError"],
                    "/v1/models/<target:path>": ["GoogleError", "OpenAIError"]}.get(
            path, ["GoogleError"] if path.startswith("/v1beta/") else ["ErrorEnvelope"])
        assert refs == expected, (method, path)
    # gateway bodies are described, not enforced: other fields are allowed
    gemini = doc["paths"]["/v1beta/models/{target}"]["post"]
    assert gemini["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/GeminiRequest")
    bodies = [ref["$ref"].rsplit("/", 1)[1] for ref in doc["components"]["schemas"]["GeminiRequest"]["anyOf"]]
    assert bodies == ["GenerateContentRequest", "EmbedContentRequest", "BatchEmbedContentsRequest"]
    assert all(doc["components"]["schemas"][body]["additionalProperties"] is True for body in bodies)
    target = next(p for p in gemini["parameters"] if p["name"] == "target")["description"]
    assert all(method in target for method in ("generateContent", "streamGenerateContent", "embedContent",
                                               "batchEmbedContents"))


def test_the_routes_that_call_an_upstream_document_their_502_and_extra_fields(tmp_path: Any) -> None:
    doc = document(app_for(tmp_path, "schemas_upstream"))
    calling = {(m.upper(), p) for p, ops in doc["paths"].items() for m, op in ops.items()
               if "502" in op["responses"]}
    assert calling == {
        ("GET", "/api/channel/test/{channel_id}"), ("GET", "/api/channel/test"),
        ("GET", "/api/channel/update_balance/{channel_id}"), ("GET", "/api/channel/update_balance"),
        ("GET", "/api/channel/fetch_models/{channel_id}"), ("POST", "/api/channel/fetch_models")}
    reply = doc["paths"]["/api/channel/test/{channel_id}"]["get"]["responses"]["200"]["content"]
    schema = doc["components"]["schemas"][reply["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]
    assert {"success", "message", "time", "data"} <= set(schema["required"])
    assert doc["paths"]["/api/channel/fetch_models"]["post"]["x-access"] == "root"


def test_envelope_replies_wrap_the_declared_data(tmp_path: Any) -> None:
    doc = document(app_for(tmp_path, "schemas_envelope"))
    reply = doc["paths"]["/api/user/self"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert reply["required"] == ["success", "message", "data"]
    assert reply["properties"]["data"]["$ref"].endswith("/SelfView")
    self_view = doc["components"]["schemas"]["SelfView"]
    assert "password" not in self_view["properties"]
    params = {p["name"]: p for p in doc["paths"]["/api/log/"]["get"]["parameters"]}
    assert params["type"]["schema"]["type"] == "integer" and params["type"]["in"] == "query"
    assert doc["paths"]["/api/user/{user_id}"]["get"]["parameters"][0]["in"] == "path"


async def test_the_document_and_the_page_are_served_to_anyone(embedded_app: Running) -> None:
    anonymous = embedded_app.client()
    response = await anonymous.get("/api/openapi.json")
    assert response.status_code == 200, response.text
    assert response.json() == document(embedded_app.app)
    page = await anonymous.get("/api/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/api/openapi.json" in page.text and "http" not in page.text.replace("http-equiv", "")


# ---- one translation of validation failures ------------------------------------------------------------

class Inner(Schema):
    type: Int64
    flag: Bool | None = None


class Outer(Schema):
    name: Str
    ids: list[Annotated[int, IntRule(1)]] = []
    channel: Inner | None = None


class Flat(Outer):
    bare_members = frozenset({"channel"})


@pytest.mark.parametrize(("body", "message"), [
    ({}, "name: is required"),
    ({"name": None}, "name: is required"),
    ({"name": 5}, "name: must be a string"),
    ({"name": "n", "channel": {"type": True}}, "channel.type: must be an integer"),
    ({"name": "n", "channel": {"type": 1.5}}, "channel.type: must be an integer"),
    ({"name": "n", "channel": {"type": 2**63}}, "channel.type: is out of range"),
    ({"name": "n", "channel": {"type": 1, "flag": 1}}, "channel.flag: must be a boolean"),
    ({"name": "n", "channel": "x"}, "channel: must be an object"),
    ({"name": "n", "ids": [1, 2, 0]}, "ids[2]: must be at least 1"),
    ({"name": "n", "ids": "x"}, "ids: must be an array"),
])
def test_a_validation_failure_names_the_field_first(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(body)
    assert message_of(caught.value) == message


def test_integral_floats_are_integers_and_members_can_be_named_bare() -> None:
    assert Outer.model_validate({"name": "n", "channel": {"type": 3.0}}).channel == Inner(type=3)
    with pytest.raises(ValidationError) as caught:
        Flat.model_validate({"name": "n", "channel": {"type": "1"}})
    assert message_of(caught.value, Flat.bare_members) == "type: must be an integer"


# ---- each reply shape is declared once: its model, built by its own `of()` -----------------------------

NOT_BUILT = {  # reply shapes that no `of()` builds, each with the reason
    "ChannelPage": "the page payload (`Page.payload`) with `type_counts`: a container, like `Paged`",
    "OAuthBinding": "never built: the route answers an empty list (no sign-in with other providers)",
    "CustomOAuthProvider": "never built: the route answers an empty list",
    "PrefillGroup": "never built: the route answers an empty list",
    "UptimeGroup": "never built: the route answers an empty list",
    "UptimeMonitor": "never built: the route answers an empty list (inside `UptimeGroup`)",
    "SubscriptionPlanItem": "never built: the route answers an empty list (no subscriptions)",
}
SERVER = Path(server.__file__).parent  # the code the app was imported from


def reply_shapes(app: Any) -> set[type[BaseModel]]:
    """Every model the envelope routes declare as (part of) their `data`: through lists, unions, dict
    values, generic containers (`Paged[X]` gives X) and the fields of the models themselves. A `RAW` route
    that answers the envelope with a field next to `data` (the channel test, a balance) declares the
    whole body: its `data` is walked the same way."""
    found: set[type[BaseModel]] = set()

    def walk(declared: Any) -> None:
        if isinstance(declared, type) and issubclass(declared, BaseModel):
            generic = declared.__pydantic_generic_metadata__
            if generic["origin"] is not None:
                for arg in generic["args"]:
                    walk(arg)
            elif declared not in found:
                found.add(declared)
                for info in declared.model_fields.values():
                    walk(info.annotation)
        for arg in get_args(declared):
            walk(arg)

    for _, _, ctx in operations(app):
        if getattr(ctx, "declared", False) and ctx.wire is Wire.ENVELOPE:
            walk(ctx.reply)
        elif getattr(ctx, "declared", False) and ctx.wire is Wire.RAW and isinstance(ctx.reply, type) \
                and issubclass(ctx.reply, BaseModel) and "data" in ctx.reply.model_fields:
            walk(ctx.reply.model_fields["data"].annotation)
    return found


def built_shapes(app: Any) -> list[type[BaseModel]]:
    """The reply shapes that must be built by their `of()`: every one but NOT_BUILT — a reply of one field
    (`{"id": 5}`, a count, a flag) too, so that no handler answers a hand-built dict."""
    return sorted((m for m in reply_shapes(app) if "of" in vars(m) or m.__name__ not in NOT_BUILT),
                  key=lambda m: (m.__module__, m.__name__))


def package_of(model: type[BaseModel]) -> Path:
    """Where the model's domain lives (`server/accounts/` for `server.accounts.schemas.UserView`): no other
    domain may import it, so a copy of its shape could only be built there."""
    return SERVER / model.__module__.split(".")[1]


def parsed(folder: Path) -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
            for path in sorted(folder.rglob("*.py"))]


def builds_outside_own_class(tree: ast.Module, names: set[str]) -> list[tuple[int, str]]:
    """Calls `X(...)`, `X.model_validate(...)`, `X.model_construct(...)` of a model named in `names`
    anywhere but inside the body of class X itself (its `of`), and any use of `from_attributes`."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, inside: str | None) -> None:
        if isinstance(node, ast.ClassDef):
            inside = node.name
        if isinstance(node, ast.keyword) and node.arg == "from_attributes":
            out.append((node.value.lineno, "from_attributes (a column would reach a reply by its name)"))
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr.startswith("model_") and \
                    isinstance(func.value, ast.Name) and func.value.id in names:
                out.append((node.lineno, f"{func.value.id}.{func.attr}(…) outside its of()"))
            elif isinstance(func, ast.Name) and func.id in names and func.id != inside:
                out.append((node.lineno, f"{func.id}(…) outside its of()"))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, None)
    return out


def test_each_reply_shape_is_built_only_by_its_own_of(tmp_path: Any) -> None:
    """A reply model is the one declaration of its shape: it has its own `of()` (keyword arguments, so
    mypy checks every field), forbids a stray field, converts no value (`strict`), and nothing in the
    server builds or validates it anywhere else — so no route answers a hand-built copy of it."""
    app = app_for(tmp_path, "reply_shapes")
    shapes = built_shapes(app)
    names = {m.__name__ for m in shapes}
    assert {"UserView", "SelfView", "LoginView", "ChannelView", "KeyStatusItem", "TokenView", "TokenUsage",
            "LogView", "OwnLogView", "RedemptionView", "TopUpView", "SecondFactorRequired", "PasskeyOptions",
            "BalanceData", "TestTime"} <= names  # what the walk must reach (unions, RAW envelopes too)
    problems = []
    for model in shapes:
        config = model.model_config
        if "of" not in vars(model) or config.get("extra") != "forbid" or not config.get("strict"):
            problems.append(f"{model.__module__}.{model.__name__}: not a Reply built by its own of()")
    for package in sorted({package_of(m) for m in shapes}):
        local = {m.__name__ for m in shapes if package_of(m) == package}
        for path, tree in parsed(package):
            for line, call in builds_outside_own_class(tree, local):
                problems.append(f"{path.relative_to(SERVER.parent)}:{line}: {call}")
    assert not problems, "\n".join(problems)
    present = {m.__name__ for m in reply_shapes(app)}
    assert set(NOT_BUILT) <= present, "an exception outlived its shape"
    assert not [m for m in reply_shapes(app) if m.__name__ in NOT_BUILT and "of" in vars(m)], \
        "an exception is built by an of() now: remove it from NOT_BUILT"


def test_no_dict_in_a_domain_mirrors_one_of_its_reply_shapes(tmp_path: Any) -> None:
    """No dict literal in a reply model's domain carries every one of its fields: a shape is not declared a
    second time as a dict (as the `views.py` modules once did next to the schemas, and as the one-field
    replies `{"deleted": n}` were built in their handlers). An error's own fields (`fields=` of an error,
    server/errors.py: the failed channel test's `time` 0) are not a reply's `data`."""
    mirrors = []
    for model in built_shapes(app_for(tmp_path, "reply_mirrors")):
        fields = set(model.model_fields)
        for path, tree in parsed(package_of(model)):
            error_fields = {id(k.value) for k in ast.walk(tree)
                            if isinstance(k, ast.keyword) and k.arg == "fields"}
            for node in ast.walk(tree):
                if isinstance(node, ast.Dict) and id(node) not in error_fields:
                    keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                    if keys >= fields:
                        mirrors.append(f"{path.relative_to(SERVER.parent)}:{node.lineno}: {model.__name__}")
    assert not mirrors, "\n".join(mirrors)
