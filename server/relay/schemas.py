"""Schemas of the model-call routes, for the API document only.

The gateway forwards the caller's bytes untouched and reads only a few fields from a parsed copy
(`server.upstream.providers.bodies`); these models describe those fields and allow any other
(`additionalProperties`).
Nothing here is used to validate or re-serialise a body on the call path.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

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


class GenerateQuery(Schema):
    alt: str | None = Field(None, description="sse: stream as server-sent events")


class GeneratePath(Schema):
    target: str = Field(description="`{model}:generateContent` or `{model}:streamGenerateContent`",
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
