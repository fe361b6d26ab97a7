"""Validation of model-call bodies (docs/API.md#gemini-generatecontent-g1, #openai-moderation-g2): what the
gateway must know before it reserves and routes, read from a parsed copy; the caller's bytes themselves are
forwarded untouched.

Every refusal is a 400 whose message names the field (`param` for OpenAI routes). A string anywhere in the
body that is not Unicode text (a lone surrogate escape such as `"\\ud800"`) is refused once, here, before
anything reads it; NUL and other control characters are refused only in the model name (it is stored in
the logs and echoed in messages; prompt text is the caller's business and is forwarded as sent). Gemini
fields are accepted in camelCase or snake_case (the google-genai SDK sends snake_case inside
`speech_config`); both spellings at one level are refused.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from server.relay.errors import GatewayError
from server.web.text import first_bad_text

DEFAULT_MODERATION_MODEL = "omni-moderation-latest"


def invalid(message: str, param: str | None = None) -> GatewayError:
    return GatewayError(400, "invalid_request", message, param=param)


# Where a lone surrogate could come from in a UTF-8 body: a `\uD800`–`\uDFFF` escape, or the bytes of an
# encoded surrogate (json.loads decodes bytes with "surrogatepass"). A body with neither — nearly every
# one — skips the walk over the parsed value; a body in another encoding (BOM, NULs up front) is walked.
_MAY_HOLD_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def _may_hold_surrogate(body: bytes) -> bool:
    head = body[:4]
    return (b"\x00" in head or head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff"))
            or _MAY_HOLD_SURROGATE.search(body) is not None)


def parse_object(body: bytes) -> dict[str, Any]:
    if not body:
        raise invalid("request body must be a JSON object")
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise invalid("request body is not valid JSON") from None
    if not isinstance(value, dict):
        raise invalid("request body must be a JSON object")
    bad = first_bad_text(value, nul=False) if _may_hold_surrogate(body) else None
    if bad is not None:
        field, problem = bad
        top = None if field == "request body" else field.split(".")[0].split("[")[0]
        raise invalid(f"{field}: {problem}", top)
    return value


MODEL_NAME_MAX = 255


def check_model_name(model: str, label: str = "model") -> str:
    """A model name is an identifier: no control or format characters, at most 255 characters (it is
    stored in the logs and echoed in error messages)."""
    if len(model) > MODEL_NAME_MAX or any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in model):
        raise invalid(f"{label}: must be at most {MODEL_NAME_MAX} characters without control characters",
                      label)
    return model


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def _field(obj: dict[str, Any], name: str, path: str) -> Any:
    """`name` (camelCase) or its snake_case twin; both present → 400."""
    snake = _snake(name)
    has_camel, has_snake = name in obj, snake != name and snake in obj
    if has_camel and has_snake:
        raise invalid(f"{path}{name}: given both as {name} and {snake}")
    return obj.get(name) if has_camel else obj.get(snake)


def _object(value: Any, label: str, *, optional: bool = True) -> dict[str, Any] | None:
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise invalid(f"{label}: must be an object")
    return value


def _string(value: Any, label: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(f"{label}: must be a string")
    return value


def _texts_of_parts(parts: Any, label: str, out: list[str]) -> None:
    if not isinstance(parts, list):
        raise invalid(f"{label}: must be an array of objects")
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            raise invalid(f"{label}[{j}]: must be an object")
        text = part.get("text")
        if isinstance(text, str):
            out.append(text)


@dataclass(frozen=True, slots=True)
class GenerateBody:
    texts: list[str]  # prompt text (contents and systemInstruction) for the estimate
    content_chars: int  # characters of text in `contents`
    wants_audio: bool
    max_output_tokens: int | None


def parse_generate(body: bytes) -> GenerateBody:
    data = parse_object(body)
    contents = data.get("contents")
    if not isinstance(contents, list) or not contents:
        raise invalid("contents: must be a non-empty array of objects")
    texts: list[str] = []
    for i, item in enumerate(contents):
        if not isinstance(item, dict):
            raise invalid(f"contents[{i}]: must be an object")
        _string(item.get("role"), f"contents[{i}].role")
        _texts_of_parts(item.get("parts"), f"contents[{i}].parts", texts)
    content_chars = sum(len(t) for t in texts)

    system = _object(_field(data, "systemInstruction", ""), "systemInstruction")
    if system is not None and system.get("parts") is not None:
        _texts_of_parts(system.get("parts"), "systemInstruction.parts", texts)

    wants_audio, max_tokens = False, None
    config = _object(_field(data, "generationConfig", ""), "generationConfig")
    if config is not None:
        p = "generationConfig."
        modalities = _field(config, "responseModalities", p)
        if modalities is not None:
            if not isinstance(modalities, list) or not all(isinstance(m, str) for m in modalities):
                raise invalid(f"{p}responseModalities: must be an array of strings")
            wants_audio = any(m.upper() == "AUDIO" for m in modalities)
        max_tokens = _field(config, "maxOutputTokens", p)
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise invalid(f"{p}maxOutputTokens: must be an integer ≥ 1")
        speech = _object(_field(config, "speechConfig", p), f"{p}speechConfig")
        if speech is not None:
            _check_speech(speech, f"{p}speechConfig.")
    return GenerateBody(texts, content_chars, wants_audio, max_tokens)


def _check_voice(voice: Any, label: str) -> None:
    obj = _object(voice, label)
    if obj is None:
        return
    prebuilt = _object(_field(obj, "prebuiltVoiceConfig", f"{label}."), f"{label}.prebuiltVoiceConfig")
    if prebuilt is not None:
        _string(_field(prebuilt, "voiceName", f"{label}.prebuiltVoiceConfig."),
                f"{label}.prebuiltVoiceConfig.voiceName")


def _check_speech(speech: dict[str, Any], p: str) -> None:
    _check_voice(_field(speech, "voiceConfig", p), f"{p}voiceConfig")
    _string(_field(speech, "languageCode", p), f"{p}languageCode")
    multi = _object(_field(speech, "multiSpeakerVoiceConfig", p), f"{p}multiSpeakerVoiceConfig")
    if multi is None:
        return
    label = f"{p}multiSpeakerVoiceConfig.speakerVoiceConfigs"
    speakers = _field(multi, "speakerVoiceConfigs", f"{p}multiSpeakerVoiceConfig.")
    if speakers is None:
        return
    if not isinstance(speakers, list):
        raise invalid(f"{label}: must be an array of objects")
    for i, item in enumerate(speakers):
        if not isinstance(item, dict):
            raise invalid(f"{label}[{i}]: must be an object")
        _string(item.get("speaker"), f"{label}[{i}].speaker")
        _check_voice(_field(item, "voiceConfig", f"{label}[{i}]."), f"{label}[{i}].voiceConfig")


@dataclass(frozen=True, slots=True)
class ModerationBody:
    data: dict[str, Any]
    model: str
    texts: list[str]
    model_given: bool


def parse_moderation(body: bytes) -> ModerationBody:
    data = parse_object(body)
    value = data.get("input")
    texts: list[str] = []
    bad = invalid("input: must be a non-empty string, a non-empty array of non-empty strings, or a "
                  "non-empty array of text/image_url parts", "input")
    if isinstance(value, str):
        if not value:
            raise bad
        texts.append(value)
    elif isinstance(value, list) and value:
        if all(isinstance(v, str) for v in value):
            if not all(value):
                raise bad
            texts.extend(value)
        elif all(isinstance(v, dict) for v in value):
            for part in value:
                kind = part.get("type")
                if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
                    texts.append(part["text"])
                elif (kind == "image_url" and isinstance(part.get("image_url"), dict)
                      and isinstance(part["image_url"].get("url"), str) and part["image_url"]["url"]):
                    continue
                else:
                    raise bad
        else:
            raise bad
    else:
        raise bad
    model = data.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise invalid("model: must be a non-empty string", "model")
    if model is not None:
        check_model_name(model.strip())
    return ModerationBody(data, (model or DEFAULT_MODERATION_MODEL).strip(), texts, model is not None)
