"""The model-call routes: Gemini under `/v1beta` and `/v1` (the google-genai default); OpenAI chat
completions, responses, embeddings, moderations and model lists under `/v1`; Anthropic messages and
count_tokens under `/v1/messages`. Authenticated by API key, not by a login; bodies pass through as bytes
(their schemas only document them).

This is the edge of the relay: each handler hands the worker's `Relay` (`server/relay/pipeline.py`) the
request as plain values (`incoming`) and the format of its route (`server/upstream/formats/`), and turns
the reply into a response.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sanic import Blueprint, Request
from sanic.response import HTTPResponse, json, raw

from core.enums import ChannelType
from server.relay.call import Incoming, Reply
from server.relay.schemas import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    CountTokensRequest,
    CountTokensResponse,
    EmbeddingsRequest,
    EmbeddingsResponse,
    GeminiModelList,
    GeminiRequest,
    GeminiResponse,
    GeneratePath,
    GenerateQuery,
    MessagesRequest,
    MessagesResponse,
    ModelList,
    ModerationRequest,
    ModerationResponse,
    ResponsesRequest,
    ResponsesResponse,
)
from server.upstream.formats.anthropic_messages import COUNT_FORMAT
from server.upstream.formats.chat_routes import CHAT_FORMAT, MESSAGES_FORMAT
from server.upstream.formats.gemini_methods import gemini_format
from server.upstream.formats.openai_embeddings import EMBEDDINGS_FORMAT
from server.upstream.formats.openai_moderation import MODERATION_FORMAT
from server.upstream.formats.openai_responses import RESPONSES_FORMAT
from server.upstream.providers import provider
from server.web.access import Access, Wire, route
from server.web.state import services_of

if TYPE_CHECKING:
    from server.relay.pipeline import Relay

bp = Blueprint("relay")

GEMINI = provider(ChannelType.GEMINI)
OPENAI = provider(ChannelType.OPENAI)
ANTHROPIC = provider(ChannelType.ANTHROPIC)
LISTED = (CHAT_FORMAT.channel_types | EMBEDDINGS_FORMAT.channel_types | MODERATION_FORMAT.channel_types
          | RESPONSES_FORMAT.channel_types | MESSAGES_FORMAT.channel_types)
"""The channel types whose models `GET /v1/models` lists (every type a `/v1` route is served by), in
OpenAI's shape or Anthropic's."""
FAMILIES = (("/v1beta/", Wire.GOOGLE), ("/v1/messages", Wire.ANTHROPIC), ("/v1/", Wire.GOOGLE_OR_OPENAI))
"""The wire of a path that matched no route (its errors are shaped like its family's)."""


def relay_of(request: Request) -> Relay:
    return services_of(request).relay


def incoming(request: Request) -> Incoming:
    """The request as plain values: the one place a Sanic `Request` meets the relay. These routes run
    without the app's middleware (`server/app.py` `without_middleware`): the request is identified here
    (request id, client IP: `Guard.identify`), and every reply carries the request id."""
    ctx = request.ctx
    if not hasattr(ctx, "request_id"):
        services_of(request).guard.identify(request)
    return Incoming(request.headers, request.args, request.body, request.path, ctx.client_ip, ctx.request_id,
                    request.respond)


def _response(reply: Reply | None) -> HTTPResponse | None:
    if reply is None:  # a stream, already written
        return None
    return raw(reply.body, status=reply.status, content_type=reply.content_type, headers=reply.headers)


@route(bp, "POST", "/v1beta/models/<target:path>", access=Access.API_KEY, body=GeminiRequest,
       query=GenerateQuery, path_params=GeneratePath, passthrough=True, reply=GeminiResponse,
       wire=Wire.GOOGLE)
async def generate_v1beta(request: Request, target: str) -> HTTPResponse | None:
    """Call a Gemini model (generateContent, streamGenerateContent, embedContent or batchEmbedContents).
    The call is charged on the usage the provider reports (reserved up front from an estimate: with the
    output cap for text and speech, the prompt alone for embeddings); the reply is the provider's,
    unchanged. Other methods (countTokens, …) are 404s."""
    return _response(await relay_of(request).call(incoming(request), gemini_format(target), target))


@route(bp, "POST", "/v1/models/<target:path>", access=Access.API_KEY, body=GeminiRequest,
       query=GenerateQuery, path_params=GeneratePath, passthrough=True, reply=GeminiResponse,
       wire=Wire.GOOGLE_OR_OPENAI)
async def generate_v1(request: Request, target: str) -> HTTPResponse | None:
    """Call a Gemini model (the same as under /v1beta, where the google-genai SDK sends it by default)."""
    return _response(await relay_of(request).call(incoming(request), gemini_format(target), target))


@route(bp, "GET", "/v1beta/models", access=Access.API_KEY, reply=GeminiModelList, wire=Wire.GOOGLE)
async def gemini_models(request: Request) -> HTTPResponse:
    """The Gemini models this API key may call (Google's list shape)."""
    listed = await relay_of(request).models(incoming(request), GEMINI, GEMINI.channel_types)
    return json(listed, headers={"X-Request-Id": request.ctx.request_id})


@route(bp, "GET", "/v1/models", access=Access.API_KEY, reply=ModelList, wire=Wire.OPENAI_OR_ANTHROPIC)
async def openai_models(request: Request) -> HTTPResponse:
    """The models this API key may call (OpenAI's list shape, or Anthropic's).
    Anthropic's when the request has an `anthropic-version` header (one page, sorted by id)."""
    dialect = ANTHROPIC if "anthropic-version" in request.headers else OPENAI
    listed = await relay_of(request).models(incoming(request), dialect, LISTED)
    return json(listed, headers=dict.fromkeys(dialect.request_id_headers, request.ctx.request_id))


@route(bp, "POST", "/v1/moderations", access=Access.API_KEY, body=ModerationRequest, passthrough=True,
       reply=ModerationResponse, wire=Wire.OPENAI)
async def moderations(request: Request) -> HTTPResponse:
    """Classify text with an OpenAI moderation model.
    Charged on the prompt estimate; the reply is the provider's, unchanged."""
    reply = await relay_of(request).call(incoming(request), MODERATION_FORMAT, "moderations")
    assert reply is not None  # moderation never streams
    return raw(reply.body, status=reply.status, content_type=reply.content_type, headers=reply.headers)


@route(bp, "POST", "/v1/chat/completions", access=Access.API_KEY, body=ChatCompletionRequest,
       passthrough=True, reply=ChatCompletionResponse, wire=Wire.OPENAI)
async def chat_completions(request: Request) -> HTTPResponse | None:
    """Chat with a model, plain or streamed (`stream: true`): on an OpenAI-compatible or Gemini channel the
    reply and every stream event are the upstream's, unchanged, except the usage chunk, which reaches the
    caller only when `stream_options.include_usage` is true; on an Anthropic (Claude) channel the request
    is converted to Anthropic's Messages API and the reply and stream back (what a Claude model cannot
    take, such as `n` > 1 or audio parts, is a 400 naming the field). Reserved up front from the prompt
    estimate and the output cap (`PreConsumedCompletionTokens` when the request names none), charged on
    the usage the upstream reports, cache reads and writes priced by `CacheRatio` and `CreateCacheRatio`."""
    return _response(await relay_of(request).call(incoming(request), CHAT_FORMAT, "chat/completions"))


@route(bp, "POST", "/v1/responses", access=Access.API_KEY, body=ResponsesRequest, passthrough=True,
       reply=ResponsesResponse, wire=Wire.OPENAI)
async def responses(request: Request) -> HTTPResponse | None:
    """Create a model response (OpenAI's Responses API) on an OpenAI or Custom channel.
    Plain or streamed (`stream: true`). Reserved up front from the input estimate and `max_output_tokens`
    (`PreConsumedCompletionTokens` when the request names none), charged on the usage the upstream
    reports, cached input priced by `CacheRatio`; the reply and every stream event are the upstream's,
    unchanged. `background: true` is refused, and stored responses are not served (`GET`/`DELETE
    /v1/responses/{id}` are 404s)."""
    return _response(await relay_of(request).call(incoming(request), RESPONSES_FORMAT, "responses"))


@route(bp, "POST", "/v1/embeddings", access=Access.API_KEY, body=EmbeddingsRequest, passthrough=True,
       reply=EmbeddingsResponse, wire=Wire.OPENAI)
async def embeddings(request: Request) -> HTTPResponse:
    """Embed texts or token ids with a model on an OpenAI-compatible or Gemini channel (floats or
    base64, as asked). Reserved on the prompt estimate, charged on `usage.prompt_tokens`; the reply is
    the upstream's, unchanged."""
    reply = await relay_of(request).call(incoming(request), EMBEDDINGS_FORMAT, "embeddings")
    assert reply is not None  # embeddings never stream
    return raw(reply.body, status=reply.status, content_type=reply.content_type, headers=reply.headers)


@route(bp, "POST", "/v1/messages", access=Access.API_KEY, body=MessagesRequest, passthrough=True,
       reply=MessagesResponse, wire=Wire.ANTHROPIC)
async def messages(request: Request) -> HTTPResponse | None:
    """Create a message (Anthropic's Messages API), plain or streamed. Key in `x-api-key` or
    `Authorization`. On an Anthropic channel the reply and every stream event are the upstream's,
    unchanged, and the caller's `anthropic-version` (else `2023-06-01`) and `anthropic-beta` go upstream;
    on an OpenAI-compatible or Gemini channel the request is converted to OpenAI's chat completions and the
    reply and stream back (a `document` block or a server tool is a 400 naming the field). Reserved up
    front from the prompt estimate and `max_tokens`, charged on the usage the upstream reports, cache reads
    and 5-minute and 1-hour cache writes priced by `CacheRatio` and `CreateCacheRatio`. Errors are
    Anthropic's error objects (a short balance is a 402 `billing_error`)."""
    return _response(await relay_of(request).call(incoming(request), MESSAGES_FORMAT, "messages"))


@route(bp, "POST", "/v1/messages/count_tokens", access=Access.API_KEY, body=CountTokensRequest,
       passthrough=True, reply=CountTokensResponse, wire=Wire.ANTHROPIC)
async def count_tokens(request: Request) -> HTTPResponse:
    """Count a Messages body's input tokens: Tollway's own estimate, not the provider's count.
    The key and the body are checked; nothing is sent upstream, reserved, charged or logged, and the
    model need not be served."""
    count = await relay_of(request).count_tokens(incoming(request), COUNT_FORMAT)
    return json({"input_tokens": count}, headers=dict.fromkeys(ANTHROPIC.request_id_headers,
                                                               request.ctx.request_id))
