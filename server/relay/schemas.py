"""Schemas of the model-call routes, for the API document only.

The gateway forwards the caller's bytes untouched and reads only a few fields from a parsed copy
(`server.upstream.providers.bodies`); these models describe those fields and allow any other
(`additionalProperties`).
Nothing here is used to validate or re-serialise a body on the call path.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, RootModel

from server.web.schema import Schema


class Open(Schema):
    """A provider object: the fields named are the ones the gateway reads or writes; others pass."""

    model_config = ConfigDict(extra="allow")


class Part(Open):
    text: str | None = Field(None, description="counted for the prompt estimate")


class Content(Open):
    role: str | None = None
    parts: list[Part] | None = None


class GenerationConfig(Open):
    responseModalities: list[str] | None = Field(
        None, description="AUDIO asks for speech (the model must be able to speak)")
    maxOutputTokens: int | None = Field(None, description="reserved for up front")
    speechConfig: dict[str, Any] | None = None


class GenerateContentRequest(Open):
    """A Gemini generateContent body (camelCase or snake_case, not both at one level)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [
        {"contents": [{"parts": [{"text": "Say hello"}]}],
         "generationConfig": {"responseModalities": ["AUDIO"]}}]})

    contents: list[Content]
    systemInstruction: Content | None = None
    generationConfig: GenerationConfig | None = None


class GenerateContentResponse(Open):
    """The provider's answer, forwarded as sent (`usageMetadata` is what the call is charged on). A
    stream is a JSON array of these, or server-sent events of them with `alt=sse`."""

    candidates: list[dict[str, Any]] | None = None
    usageMetadata: dict[str, Any] | None = None


class EmbedContentRequest(Open):
    """A Gemini embedContent body."""

    content: Content = Field(description="its parts' text is counted for the prompt estimate")


class EmbedRequest(Open):
    content: Content
    model: str | None = Field(None, description="forwarded as sent (only the path's model is mapped)")


class BatchEmbedContentsRequest(Open):
    """A Gemini batchEmbedContents body (what the google-genai SDK's `embed_content` sends)."""

    requests: list[EmbedRequest] = Field(min_length=1)


class GeminiRequest(RootModel[GenerateContentRequest | EmbedContentRequest | BatchEmbedContentsRequest]):
    """The body of the path's method: generateContent and streamGenerateContent take `contents`,
    embedContent `content`, batchEmbedContents `requests`."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"contents": [{"parts": [{"text": "Say hello"}]}],
         "generationConfig": {"responseModalities": ["AUDIO"]}}]})


class EmbedContentResponse(Open):
    """The provider's embedContent answer, forwarded as sent (`usageMetadata`, when it is there, is what
    the call is charged on; else the estimate)."""

    embedding: dict[str, Any] | None = None
    usageMetadata: dict[str, Any] | None = None


class BatchEmbedContentsResponse(Open):
    """The provider's batchEmbedContents answer, forwarded as sent (one embedding per request)."""

    embeddings: list[dict[str, Any]] | None = None
    usageMetadata: dict[str, Any] | None = None


GeminiResponse = GenerateContentResponse | EmbedContentResponse | BatchEmbedContentsResponse
"""The answer of the path's method."""


class GenerateQuery(Schema):
    alt: str | None = Field(None, description="sse: stream as server-sent events")


class GeneratePath(Schema):
    target: str = Field(description="`{model}:{method}`, the method one of generateContent, "
                                    "streamGenerateContent, embedContent, batchEmbedContents (another is a "
                                    "404)",
                        examples=["gemini-2.5-flash-preview-tts:generateContent"])


class ModerationRequest(Open):
    input: str | list[Any] = Field(description="a text, a list of texts, or text/image_url parts")
    model: str | None = Field(None, description="defaults to omni-moderation-latest",
                              examples=["omni-moderation-latest"])


class ModerationResponse(Open):
    """The provider's answer, forwarded as sent."""

    id: str | None = None
    model: str | None = None
    results: list[dict[str, Any]] | None = None


class ChatMessage(Open):
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(Open):
    """An OpenAI chat completion body; fields not named here pass to the upstream as sent."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Say hello"}]}]})

    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool | None = Field(None, description="answer as server-sent events")
    stream_options: dict[str, Any] | None = Field(
        None, description="`include_usage: true` adds the usage chunk before `[DONE]`")
    max_tokens: int | None = Field(None, ge=1, description="reserved for up front")
    max_completion_tokens: int | None = Field(None, ge=1, description="reserved for up front (wins)")
    n: int | None = Field(None, ge=1)
    tools: list[dict[str, Any]] | None = None


class ChatCompletionResponse(Open):
    """The upstream's answer, forwarded as sent (`usage` is what the call is charged on). A stream is
    server-sent events of chat completion chunks, then `data: [DONE]`."""

    id: str | None = None
    object: str | None = None
    choices: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None


class EmbeddingsRequest(Open):
    """An OpenAI embeddings body; fields not named here pass to the upstream as sent."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [
        {"model": "text-embedding-3-small", "input": ["a", "b"]}]})

    model: str = Field(min_length=1)
    input: str | list[str] | list[int] | list[list[int]] = Field(
        description="a text, texts, token ids, or lists of token ids (none empty)")
    encoding_format: str | None = Field(None, description="float or base64")
    dimensions: int | None = Field(None, ge=1)


class EmbeddingsResponse(Open):
    """The upstream's answer, forwarded as sent (`usage.prompt_tokens` is what the call is charged on)."""

    object: str | None = None
    data: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None


class ResponsesRequest(Open):
    """An OpenAI Responses body; fields not named here pass to the upstream as sent
    (`previous_response_id` too)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [
        {"model": "gpt-4.1-mini", "input": "Say hello"}]})

    model: str = Field(min_length=1)
    input: str | list[dict[str, Any]] | None = Field(
        None, description="a text, or input items; their text is counted for the prompt estimate")
    instructions: str | None = Field(None, description="counted for the prompt estimate")
    stream: bool | None = Field(None, description="answer as server-sent events")
    max_output_tokens: int | None = Field(None, ge=1, description="reserved for up front")
    background: bool | None = Field(
        None, description="`true` is refused: background responses are not served")


class ResponsesResponse(Open):
    """The upstream's response, forwarded as sent (`usage` is what the call is charged on). A stream is
    the upstream's server-sent events (`response.created` … `response.completed`), unchanged."""

    id: str | None = None
    object: str | None = None
    status: str | None = None
    output: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None


class OpenAIModel(Open):
    id: str
    object: str
    created: int
    owned_by: str


class OpenAIModelList(Open):
    """The models this key may call."""

    object: str
    data: list[OpenAIModel]


class GeminiModel(Open):
    name: str
    displayName: str
    supportedGenerationMethods: list[str]


class GeminiModelList(Open):
    """The Gemini models this key may call."""

    models: list[GeminiModel]


class AnthropicMessage(Open):
    role: str = Field(description="`user` or `assistant`")
    content: str | list[dict[str, Any]] = Field(description="a text, or content blocks")


class MessagesRequest(Open):
    """An Anthropic Messages body; fields not named here pass to the upstream as sent."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [
        {"model": "claude-sonnet-4-5", "max_tokens": 256,
         "messages": [{"role": "user", "content": "Hello"}]}]})

    model: str = Field(min_length=1)
    messages: list[AnthropicMessage] = Field(min_length=1)
    max_tokens: int = Field(ge=1, description="required; reserved for up front")
    system: str | list[dict[str, Any]] | None = Field(
        None, description="a text or text blocks; counted for the prompt estimate")
    stream: bool | None = Field(None, description="answer as server-sent events")
    tools: list[dict[str, Any]] | None = Field(None, description="counted for the prompt estimate")


class MessagesResponse(Open):
    """The upstream's message, forwarded as sent (`usage` is what the call is charged on). A stream is the
    upstream's server-sent events (`message_start` … `message_stop`), unchanged."""

    id: str | None = None
    type: str | None = None
    role: str | None = None
    content: list[dict[str, Any]] | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None


class CountTokensRequest(Open):
    """A Messages body without `max_tokens` (it is ignored when sent)."""

    model: str = Field(min_length=1)
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None


class CountTokensResponse(Open):
    input_tokens: int = Field(description="Tollway's estimate, not the provider's count")


class AnthropicModel(Open):
    type: str
    id: str
    display_name: str
    created_at: str = Field(description="RFC 3339, UTC: when the earliest channel serving it was created")


class AnthropicModelList(Open):
    """The models this key may call, in one page."""

    data: list[AnthropicModel]
    has_more: bool
    first_id: str | None
    last_id: str | None


class ModelList(RootModel[OpenAIModelList | AnthropicModelList]):
    """OpenAI's list, or Anthropic's when the request carries an `anthropic-version` header."""
