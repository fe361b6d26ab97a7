"""The console's message catalogues (`server/console/static/js/i18n/<language>.js`, docs/CONSOLE.md
"Languages") agree with each other and with the code, read as files (no browser):

- every language has every message, with the plural forms its `Intl.PluralRules` needs (English `one`
  and `other`, Chinese `other`) and the same `{placeholders}`;
- every key the code looks up with `t("…")` is declared, and every declared key is looked up (an enum
  value's label key, in js/generated/enums.js's `<ENUM>_LABEL` maps, is looked up by `labelOf`, and a
  page's title key, in static/pages.json, by js/pages.js);
- the Settings page's labels, hints and section titles (keyed by option key and section id, looked up at
  run time) exist for exactly the options and sections of `core/option_registry.py`, the English ones
  word for word the registry's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from core.option_registry import SECTIONS

JS = Path(__file__).resolve().parents[2] / "server" / "console" / "static" / "js"
LANGUAGES = {"en": {"one", "other"}, "zh-CN": {"other"}}  # the plural categories each language uses
CATEGORIES = {"zero", "one", "two", "few", "many", "other"}
DYNAMIC = ("opt.", "optsec.")  # keys made at run time from the server's option keys and section ids
PLACEHOLDER = re.compile(r"\{(\w+)\}")
CALL = re.compile(r"\bt\(\s*([^,)]*)")  # the first argument of each t(…) call
LITERAL = re.compile(r'"([^"\\]+)"')
LABEL_MAP = re.compile(r"_LABEL = Object\.freeze\(\{([^}]*)\}\)")


def catalogue(language: str) -> dict[str, str]:
    """A catalogue file's object: the file is `export default { "key": "message", … };` (JSON inside)."""
    text = (JS / "i18n" / f"{language}.js").read_text()
    body = text[text.index("export default {") + len("export default "):text.rindex("};") + 1]
    parsed: dict[str, str] = json.loads(re.sub(r",\s*}$", "}", body))
    return parsed


def plural_base(key: str, messages: dict[str, str]) -> str | None:
    head, _, last = key.rpartition(".")
    return head if last in CATEGORIES and f"{head}.other" in messages else None


def bases(messages: dict[str, str]) -> set[str]:
    """The keys as the code names them: a plural's forms are one key."""
    return {plural_base(key, messages) or key for key in messages}


def used_keys() -> set[str]:
    used: set[str] = set()
    for path in JS.rglob("*.js"):
        if path.parent.name == "i18n":
            continue
        code = "\n".join(line for line in path.read_text().splitlines()
                          if not line.lstrip().startswith(("*", "/*", "//")))  # not the comments
        for argument in CALL.findall(code):
            used.update(LITERAL.findall(argument))
        for labels in LABEL_MAP.findall(code):
            used.update(key for key in LITERAL.findall(labels) if "." in key)
    used.update(entry["title"] for entry in json.loads((JS.parent / "pages.json").read_text()))
    return used


def test_every_language_has_every_message_with_its_plural_forms_and_placeholders() -> None:
    english = catalogue("en")
    for language, categories in LANGUAGES.items():
        messages = catalogue(language)
        assert bases(messages) == bases(english), (
            f"{language}: missing {sorted(bases(english) - bases(messages))}, "
            f"extra {sorted(bases(messages) - bases(english))}")
        plurals = {plural_base(key, messages) for key in messages} - {None}
        for base in plurals:
            forms = {key.rpartition(".")[2] for key in messages if plural_base(key, messages) == base}
            assert forms == categories, f"{language}: {base} has the plural forms {sorted(forms)}"
        for key, message in messages.items():
            assert message.strip() or key.endswith(".hint"), f"{language}: {key} is empty"
            reference = english.get(key) or english[f"{plural_base(key, messages)}.other"]
            assert set(PLACEHOLDER.findall(message)) == set(PLACEHOLDER.findall(reference)), (
                f"{language}: {key} has placeholders {message!r}, English {reference!r}")


def test_every_key_looked_up_is_declared_and_every_declared_key_is_looked_up() -> None:
    declared = bases(catalogue("en"))
    used = used_keys()
    assert used, "no t(\"…\") call found: the pattern no longer matches the code"
    assert sorted(used - declared) == [], "looked up but not declared"
    unused = {key for key in declared - used if not key.startswith(DYNAMIC)}
    assert sorted(unused) == [], "declared but never looked up"


def test_the_settings_labels_are_the_registrys_options_and_sections() -> None:
    expected: dict[str, str] = {}
    for section in SECTIONS:
        expected[f"optsec.{section.id}.title"] = section.title
        expected[f"optsec.{section.id}.intro"] = section.intro
        for spec in section.specs:
            expected[f"opt.{spec.key}.label"] = spec.label
            if spec.hint:
                expected[f"opt.{spec.key}.hint"] = spec.hint
    for language in LANGUAGES:
        messages = catalogue(language)
        dynamic = {key for key in messages if key.startswith(DYNAMIC)}
        assert sorted(set(expected) - dynamic) == [], f"{language}: options without a message"
        assert sorted(dynamic - set(expected)) == [], f"{language}: messages of no option"
    english = catalogue("en")
    assert {key: english[key] for key in expected} == expected  # the English is the registry's own text
