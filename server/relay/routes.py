"""The model-call routes (gateway.md §1): Gemini under `/v1beta` and `/v1` (the google-genai default),
OpenAI moderations and model lists under `/v1`. Authenticated by API key, not by a login."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.relay import calls
from server.web.access import Access, route
from server.web.state import state_of

bp = Blueprint("relay")


@route(bp, "POST", "/v1beta/models/<target:path>", access=Access.API_KEY)
async def generate_v1beta(request: Request, target: str) -> HTTPResponse | None:
    return await calls.generate(state_of(request), request, target)


@route(bp, "POST", "/v1/models/<target:path>", access=Access.API_KEY)
async def generate_v1(request: Request, target: str) -> HTTPResponse | None:
    return await calls.generate(state_of(request), request, target)


@route(bp, "GET", "/v1beta/models", access=Access.API_KEY)
async def gemini_models(request: Request) -> HTTPResponse:
    return await calls.gemini_models(state_of(request), request)


@route(bp, "GET", "/v1/models", access=Access.API_KEY)
async def openai_models(request: Request) -> HTTPResponse:
    return await calls.openai_models(state_of(request), request)


@route(bp, "POST", "/v1/moderations", access=Access.API_KEY)
async def moderations(request: Request) -> HTTPResponse:
    return await calls.moderate(state_of(request), request)
