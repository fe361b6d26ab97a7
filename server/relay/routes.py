"""The model-call routes: Gemini under `/v1beta` and `/v1` (the google-genai default), OpenAI moderations
and model lists under `/v1`. Authenticated by API key, not by a login; bodies pass through as bytes (their
schemas only document them)."""

from __future__ import annotations

from sanic import Blueprint, Request
from sanic.response import HTTPResponse

from server.relay import calls
from server.relay.schemas import (
    GeminiModelList,
    GenerateContentRequest,
    GenerateContentResponse,
    GeneratePath,
    GenerateQuery,
    ModerationRequest,
    ModerationResponse,
    OpenAIModelList,
)
from server.web.access import Access, Wire, route
from server.web.state import state_of

bp = Blueprint("relay")


@route(bp, "POST", "/v1beta/models/<target:path>", access=Access.API_KEY, body=GenerateContentRequest,
       query=GenerateQuery, path_params=GeneratePath, passthrough=True, reply=GenerateContentResponse,
       wire=Wire.GOOGLE)
async def generate_v1beta(request: Request, target: str) -> HTTPResponse | None:
    """Call a Gemini model (generateContent, or streamGenerateContent).
    The call is charged on the usage the provider reports (reserved up front from an estimate); the
    reply is the provider's, unchanged."""
    return await calls.generate(state_of(request), request, target)


@route(bp, "POST", "/v1/models/<target:path>", access=Access.API_KEY, body=GenerateContentRequest,
       query=GenerateQuery, path_params=GeneratePath, passthrough=True, reply=GenerateContentResponse,
       wire=Wire.GOOGLE_OR_OPENAI)
async def generate_v1(request: Request, target: str) -> HTTPResponse | None:
    """Call a Gemini model (the same as under /v1beta, where the google-genai SDK sends it by default)."""
    return await calls.generate(state_of(request), request, target)


@route(bp, "GET", "/v1beta/models", access=Access.API_KEY, reply=GeminiModelList, wire=Wire.GOOGLE)
async def gemini_models(request: Request) -> HTTPResponse:
    """The Gemini models this API key may call (Google's list shape)."""
    return await calls.gemini_models(state_of(request), request)


@route(bp, "GET", "/v1/models", access=Access.API_KEY, reply=OpenAIModelList, wire=Wire.OPENAI)
async def openai_models(request: Request) -> HTTPResponse:
    """The models this API key may call (OpenAI's list shape)."""
    return await calls.openai_models(state_of(request), request)


@route(bp, "POST", "/v1/moderations", access=Access.API_KEY, body=ModerationRequest, passthrough=True,
       reply=ModerationResponse, wire=Wire.OPENAI)
async def moderations(request: Request) -> HTTPResponse:
    """Classify text with an OpenAI moderation model.
    Charged on the prompt estimate; the reply is the provider's, unchanged."""
    return await calls.moderate(state_of(request), request)
