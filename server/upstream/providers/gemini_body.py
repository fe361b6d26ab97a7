"""Validation of a Gemini generateContent body (docs/api/gateway.md#gemini-generatecontent-g1): what the
gateway must know before it reserves and routes, read from a parsed copy; the caller's bytes are forwarded
untouched.

Fields are accepted in camelCase or snake_case (the google-genai SDK sends snake_case inside
`speech_config`); both spellings at one level are refused. Every refusal is a 400 naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.upstream.providers.bodies import invalid, parse_object


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


def texts_of_parts(parts: Any, label: str, out: list[str]) -> None:
    """Check `parts` is an array of objects (400 naming `label`); append the text of each to `out`."""
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
        texts_of_parts(item.get("parts"), f"contents[{i}].parts", texts)
    content_chars = sum(len(t) for t in texts)

    system = _object(_field(data, "systemInstruction", ""), "systemInstruction")
    if system is not None and system.get("parts") is not None:
        texts_of_parts(system.get("parts"), "systemInstruction.parts", texts)

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
