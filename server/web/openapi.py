"""The OpenAPI 3.1 document of the running app, generated from its route table (never written by hand).

Every route registered with `route(...)` carries its access level, schemas, reply shape and handler
docstring on its `ctx`; `document(app)` turns them into paths, operations and components:

- request bodies, query and path parameters from `body`, `query`, `path_params` (pydantic models);
- the 200 reply: the envelope `{success, message, data}` around `reply`, or `reply` itself for the routes
  that do not answer the envelope (the model calls, this document);
- the errors of the route family: the envelope `{success: false, message}` on `/api`, OpenAI's
  `{error: {message, type, param, code}}` or Google's `{error: {code, message, status}}` on model calls;
- the access level as security requirements and as `x-access` (plus `x-critical`, `x-session-only`);
- `x-no-store` and the `Cache-Control: no-store` header on a route whose reply carries a secret (a field
  marked `x-secret`: server/web/no_store.py); the 415 of a route that reads a JSON body, and the 403 of a
  route a browser may send only from this site (`same_site_only`).

`/api/docs` serves `DOCS_PAGE`, a self-contained page that reads the document and lists the routes.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ConfigDict, TypeAdapter
from sanic import Sanic

from server.web.access import Access, Wire, same_site_only
from server.web.schema import Schema

REF = "#/components/schemas/{model}"
_PARAM = re.compile(r"<([^:>]+)(?::[^>]+)?>")


class ApiDocument(Schema):
    """An OpenAPI 3.1 document."""

    model_config = ConfigDict(extra="allow")

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
    components: dict[str, Any]


SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    "session": {"type": "apiKey", "in": "cookie", "name": "session",
                "description": "The session cookie set by `POST /api/user/login` (send `New-Api-User` too)."},
    "newApiUser": {"type": "apiKey", "in": "header", "name": "New-Api-User",
                   "description": "The id of the logged-in user; required with a session or access token."},
    "accessToken": {"type": "http", "scheme": "bearer",
                    "description": "A user's access token (`GET /api/user/token`), with `New-Api-User`."},
    "apiKey": {"type": "http", "scheme": "bearer", "description": "An API key, `sk-…`."},
    "googApiKey": {"type": "apiKey", "in": "header", "name": "x-goog-api-key",
                   "description": "An API key (Gemini routes)."},
    "anthropicKey": {"type": "apiKey", "in": "header", "name": "x-api-key",
                     "description": "An API key (Anthropic routes; the model list with "
                                    "`anthropic-version`)."},
    "queryKey": {"type": "apiKey", "in": "query", "name": "key",
                 "description": "An API key in the query string (Gemini routes)."},
}

ERROR_SCHEMAS: dict[str, dict[str, Any]] = {
    "ErrorEnvelope": {
        "type": "object", "required": ["success", "message"],
        "properties": {"success": {"const": False}, "message": {"type": "string"},
                       "code": {"type": "string"}},
        "description": "A refused or failed `/api` request; a 400's message starts with the field's name. "
                       "With the option `NewApiCompatibleErrors` on, most refusals carry it with status "
                       "200, as new-api does.",
    },
    "OpenAIError": {
        "type": "object", "required": ["error"],
        "properties": {"error": {
            "type": "object", "required": ["message"],
            "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                           "param": {"type": ["string", "null"]}, "code": {"type": ["string", "null"]}}}},
        "description": "An OpenAI-style error object (an upstream's own is passed on as it came).",
    },
    "GoogleError": {
        "type": "object", "required": ["error"],
        "properties": {"error": {
            "type": "object", "required": ["code", "message", "status"],
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"},
                           "status": {"type": "string"}, "details": {"type": "array"}}}},
        "description": "A Google-style error object (an upstream's own is passed on as it came).",
    },
    "AnthropicError": {
        "type": "object", "required": ["type", "error"],
        "properties": {"type": {"const": "error"}, "error": {
            "type": "object", "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"},
                           "details": {"type": "object"}}},
            "request_id": {"type": ["string", "null"]}},
        "description": "An Anthropic-style error object (an upstream's own is passed on as it came); "
                       "`error.details.error_code` is Tollway's code.",
    },
}
_ERROR_OF = {Wire.ENVELOPE: ("ErrorEnvelope",), Wire.RAW: ("ErrorEnvelope",), Wire.OPENAI: ("OpenAIError",),
             Wire.GOOGLE: ("GoogleError",), Wire.GOOGLE_OR_OPENAI: ("GoogleError", "OpenAIError"),
             Wire.ANTHROPIC: ("AnthropicError",), Wire.OPENAI_OR_ANTHROPIC: ("OpenAIError", "AnthropicError")}
_ACCESS_TEXT = {
    Access.PUBLIC: "Anyone may call it.",
    Access.USER: "Needs a logged-in user (session cookie or access token, with `New-Api-User`).",
    Access.ADMIN: "Needs an admin or root (session cookie or access token, with `New-Api-User`).",
    Access.ROOT: "Needs root (session cookie or access token, with `New-Api-User`).",
    Access.API_KEY: "Needs an API key.",
}


def openapi_path(sanic_path: str) -> str:
    return "/" + _PARAM.sub(lambda m: "{" + m.group(1) + "}", sanic_path.lstrip("/"))


def security_of(ctx: Any) -> list[dict[str, list[str]]]:
    access: Access = ctx.access
    if access is Access.PUBLIC:
        return []
    if access is Access.API_KEY:
        if ctx.wire in (Wire.GOOGLE, Wire.GOOGLE_OR_OPENAI):
            return [{"apiKey": []}, {"googApiKey": []}, {"queryKey": []}]
        if ctx.wire in (Wire.ANTHROPIC, Wire.OPENAI_OR_ANTHROPIC):
            return [{"apiKey": []}, {"anthropicKey": []}]
        return [{"apiKey": []}]
    ways: list[dict[str, list[str]]] = [{"session": [], "newApiUser": []}]
    if not ctx.session_only:
        ways.append({"accessToken": [], "newApiUser": []})
    return ways


def _parameters(model: Any, where: str) -> list[dict[str, Any]]:
    if model is None:
        return []
    schema = model.model_json_schema(ref_template=REF)
    required = set(schema.get("required", []))
    out = []
    for name, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k not in ("title", "description")}
        if prop.get("default", "") is None:
            del prop["default"]
        if "anyOf" in prop:  # "absent or null" is simply absent in a query string
            kept = [p for p in prop["anyOf"] if p.get("type") != "null"]
            prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **(kept[0] if len(kept) == 1 else
                                                                            {"anyOf": kept})}
        field = model.model_fields.get(name)
        param: dict[str, Any] = {"name": name, "in": where, "required": where == "path" or name in required,
                                 "schema": prop}
        if field is not None and field.description:
            param["description"] = field.description
        out.append(param)
    return out


def _tag(path: str) -> str:
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) > 1:
        return parts[1]
    return "models" if parts[0] in ("v1", "v1beta") else "console"


def _envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": ["success", "message", "data"],
            "properties": {"success": {"const": True}, "message": {"type": "string"}, "data": data}}


def _error(description: str, refs: tuple[str, ...]) -> dict[str, Any]:
    schemas = [{"$ref": f"#/components/schemas/{ref}"} for ref in refs]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _responses(ctx: Any, reply: dict[str, Any], takes_input: bool, same_site: bool) -> dict[str, Any]:
    error = _ERROR_OF[ctx.wire]
    body = _envelope(reply) if ctx.wire is Wire.ENVELOPE else reply
    out: dict[str, Any] = {"200": {"description": "Success.", "content": {ctx.media_type: {"schema": body}}}}
    if ctx.secret:
        out["200"]["headers"] = {"Cache-Control": {
            "description": "The reply carries a secret: no cache may keep it (`Pragma: no-cache` too).",
            "schema": {"type": "string", "const": "no-store"}}}
    if getattr(ctx, "conditional", False):
        out["304"] = {"description": "Not modified: `If-None-Match` named the current `ETag` (no body)."}
    if takes_input:
        out["400"] = _error("A field or parameter is invalid (the message names it).", error)
    cross_site = "a browser sent it from another site (`Origin`, `Sec-Fetch-Site`: code CROSS_SITE_REQUEST)"
    if ctx.access is not Access.PUBLIC:
        out["401"] = _error("No valid credentials.", error)
        out["403"] = _error(f"The credentials do not allow this, or {cross_site}." if same_site
                            else "The credentials do not allow this.", error)
    elif same_site:
        out["403"] = _error(f"Refused: {cross_site}.", error)
    if ctx.body is not None and not ctx.passthrough:
        out["415"] = _error("The body was not sent as `application/json` (the message names the "
                            "`Content-Type` sent).", error)
    out["429"] = _error("Too many requests (see `Retry-After`).", error)
    out["4XX"] = _error("Refused (not found, conflict, too large, …).", error)
    if ctx.calls_upstream:
        out["502"] = _error("The upstream provider called for this request failed (the message says how; "
                            "it never holds a key).", error)
    out["503"] = _error("The database, the cache or every upstream is unavailable right now.", error)
    return out


def document(app: Sanic[Any, Any]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route registered with `route(...)`."""
    routes = sorted((r for r in app.router.routes if getattr(r.ctx, "declared", False)),
                    key=lambda r: (r.ctx.path_template, sorted(r.methods)))
    inputs: list[tuple[tuple[str, str], Any, TypeAdapter[Any]]] = []
    for r in routes:
        key = r.ctx.operation_id
        inputs.append(((key, "reply"), "serialization", TypeAdapter(r.ctx.reply)))
        if r.ctx.body is not None:
            inputs.append(((key, "body"), "validation", TypeAdapter(r.ctx.body)))
    schemas, defs = TypeAdapter.json_schemas(inputs, ref_template=REF)
    components = dict(defs.get("$defs", {}))
    components.update(ERROR_SCHEMAS)

    paths: dict[str, dict[str, Any]] = {}
    for r in routes:
        ctx = r.ctx
        key = ctx.operation_id
        params = _parameters(ctx.path, "path") + _parameters(ctx.query, "query")
        takes_input = bool(params) or ctx.body is not None
        description = " ".join(part for part in (ctx.description, _ACCESS_TEXT[ctx.access]) if part)
        if ctx.critical:
            description += " Rate-limited per client address like the other sensitive routes."
        if ctx.session_only:
            description += " Needs a login session (an access token is not enough)."
        if ctx.real_statuses:
            description += " Its errors keep their HTTP status in both error modes (NewApiCompatibleErrors)."
        same_site = any(same_site_only(method, ctx) for method in r.methods)
        if same_site:
            description += " A browser may send it only from this site's own pages."
        if ctx.secret:
            description += " Answers `Cache-Control: no-store`: the reply carries a secret."
        operation: dict[str, Any] = {
            "operationId": key, "summary": ctx.summary, "description": description,
            "tags": [_tag(ctx.path_template)],
            "security": security_of(ctx), "x-access": ctx.access.name.lower(),
            "responses": _responses(ctx, schemas[((key, "reply"), "serialization")], takes_input,
                                    same_site),
        }
        if ctx.critical:
            operation["x-critical"] = True
        if ctx.session_only:
            operation["x-session-only"] = True
        if ctx.secret:
            operation["x-no-store"] = True
        if params:
            operation["parameters"] = params
        if ctx.body is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": schemas[((key, "body"), "validation")]}}}
            if ctx.passthrough and ctx.access is Access.PUBLIC:  # the payment webhook
                operation["requestBody"]["description"] = "Verified as raw bytes against its signature first."
            elif ctx.passthrough:
                operation["requestBody"]["description"] = (
                    "Forwarded to the provider as sent; the schema names only the fields the gateway reads.")
        for method in sorted(r.methods):
            paths.setdefault(openapi_path(ctx.path_template), {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Tollway", "version": _version(),
                 "description": "An API gateway for AI models with a management back office. `/api` routes "
                                "answer `{success, message, data}`; the model-call routes answer in their "
                                "provider's shape. With the option `NewApiCompatibleErrors` on, an `/api` "
                                "refusal answers 200 with the error envelope, except no credential (401), a "
                                "rate limit (429), a secure verification (403), a cross-site request "
                                "(403), a body not sent as JSON (415) and unknown routes."},
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": SECURITY_SCHEMES},
    }


def _version() -> str:
    from server import __version__

    return str(__version__)


# The page served at `/api/docs`: its style and script are inline, and allowed by their hashes alone
# (server/system/routes.py `DOCS_CSP`), each the whole text between its tags.
DOCS_STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h2{margin-top:2rem;border-bottom:1px solid #ddd}.m{display:inline-block;width:4.5rem;font-weight:bold}
details{margin:.4rem 0}summary{cursor:pointer}code,pre{background:#f5f5f5;padding:.1rem .3rem}
pre{padding:.6rem;overflow:auto;font-size:13px}.a{color:#666;font-size:13px}
"""
DOCS_SCRIPT = """
fetch("/api/openapi.json").then(r => r.json()).then(doc => {
  const root = document.getElementById("ops"); root.textContent = "";
  const esc = s => String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
  const groups = {};
  for (const [path, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops)) (groups[op.tags[0]] ||= []).push([method, path, op]);
  for (const [tag, ops] of Object.entries(groups)) {
    root.insertAdjacentHTML("beforeend", `<h2>${esc(tag)}</h2>`);
    for (const [method, path, op] of ops) {
      const body = op.requestBody ? op.requestBody.content["application/json"].schema : null;
      const reply = Object.values(op.responses["200"].content)[0].schema;
      root.insertAdjacentHTML("beforeend", `<details><summary><span class="m">${method.toUpperCase()}</span>
        <code>${esc(path)}</code> ${esc(op.summary)} <span class="a">[${esc(op["x-access"])}]</span></summary>
        <p>${esc(op.description)}</p>
        ${(op.parameters || []).length ? "<p>Parameters: " + op.parameters.map(p =>
          `<code>${esc(p.name)}</code> (${p.in}${p.required ? ", required" : ""})`).join(", ") + "</p>" : ""}
        ${body ? "<p>Body:</p><pre>" + esc(JSON.stringify(body, null, 1)) + "</pre>" : ""}
        <p>Reply:</p><pre>${esc(JSON.stringify(reply, null, 1))}</pre></details>`);
    }
  }
  root.insertAdjacentHTML("beforeend", "<h2>Schemas</h2><pre>" +
    esc(JSON.stringify(doc.components.schemas, null, 1)) + "</pre>");
});
"""
DOCS_PAGE = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tollway API</title>
<style>{DOCS_STYLE}</style></head><body>
<h1>Tollway API</h1>
<p>The machine-readable document is <a href="/api/openapi.json">/api/openapi.json</a> (OpenAPI 3.1).</p>
<div id="ops">Loading…</div>
<script>{DOCS_SCRIPT}</script></body></html>
"""
