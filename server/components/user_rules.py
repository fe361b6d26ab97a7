"""Rules about users that several services share: field limits, usernames, the hierarchy, invitation codes.

A username is stored in its NFKC form (`ｆｏｏ` is `foo`), and must not hold control, format (zero-width,
bidi), private-use or unassigned characters, nor mix scripts within one word (`аlice` with a Cyrillic
`а`); accounts are unique on the case-folded NFKC form (`models.tables.username_key`). Script data comes
from `confusable_homoglyphs` (Unicode's Scripts.txt). A name written wholly in another script that looks
like an existing one (Cyrillic `аре` and Latin `ape`) is not caught: that needs the confusables skeleton.
"""

from __future__ import annotations

import re
import secrets
import string
import unicodedata

from confusable_homoglyphs import categories

from core.identity import Role
from models.tables import USERNAME_KEY_MAX, username_key
from models.users import UserRepository
from server.errors import BadRequest, Forbidden
from server.web.body import has_control_chars

USERNAME_MAX = 20
DISPLAY_NAME_MAX = 20
PASSWORD_MIN, PASSWORD_MAX = 8, 64
AFF_ALPHABET = string.ascii_letters + string.digits
AFF_CODE_MAX = 32  # the column's width; codes we issue have 8 characters
EMAIL_MAX = 50
_EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(?:\.[^@\s.]+)+")


# Scripts that may share a word (Unicode's "highly restrictive" level): Japanese, Chinese, Korean with Latin.
_SCRIPT_SETS = (frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}), frozenset({"LATIN", "HAN", "BOPOMOFO"}),
                frozenset({"LATIN", "HAN", "HANGUL"}))
_NEUTRAL = frozenset({"COMMON", "INHERITED"})
_REFUSED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_WORD = re.compile(r"[^\W_]+")  # runs of letters, marks and digits


def mixes_scripts(name: str) -> bool:
    """True when one word of `name` holds letters of scripts that do not belong together."""
    for word in _WORD.findall(name):
        scripts = {categories.alias(c) for c in word} - _NEUTRAL
        if len(scripts) > 1 and not any(scripts <= allowed for allowed in _SCRIPT_SETS):
            return True
    return False


def check_username(name: str) -> str:
    """The name to store (NFKC, trimmed), or a 400 naming `username`."""
    name = unicodedata.normalize("NFKC", name).strip()
    if not 1 <= len(name) <= USERNAME_MAX or has_control_chars(name):
        raise BadRequest(f"username: must be 1–{USERNAME_MAX} characters without control characters")
    if any(unicodedata.category(c) in _REFUSED for c in name):
        raise BadRequest("username: must not contain format (zero-width, bidi), private-use or unassigned "
                         "characters")
    if mixes_scripts(name):
        raise BadRequest("username: must not mix scripts within one word (e.g. Latin and Cyrillic letters)")
    if len(username_key(name)) > USERNAME_KEY_MAX:
        raise BadRequest(f"username: must be 1–{USERNAME_MAX} characters without control characters")
    return name


def check_password(password: str, label: str = "password") -> str:
    if not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        raise BadRequest(f"{label}: must be {PASSWORD_MIN}–{PASSWORD_MAX} characters")
    return password


def may_act_on(actor_role: int, target_role: int) -> bool:
    """An admin acts on a user only with a strictly greater role; root acts on anyone."""
    return actor_role == Role.ROOT or actor_role > target_role


def require_hierarchy(actor_role: int, target_role: int) -> None:
    if not may_act_on(actor_role, target_role):
        raise Forbidden("you cannot act on a user whose role is equal to or above yours")


async def fresh_aff_code(users: UserRepository) -> str:
    """8 random [A-Za-z0-9] characters, drawn again on a collision."""
    while True:
        code = "".join(secrets.choice(AFF_ALPHABET) for _ in range(8))
        if not await users.aff_code_taken(code):
            return code


def check_email(email: str, field: str = "email") -> str:
    """Trimmed and lower-cased; exactly one `@`, a dotted domain of non-empty labels, no blanks."""
    email = email.strip().lower()
    if len(email) > EMAIL_MAX or has_control_chars(email) or not _EMAIL.fullmatch(email):
        raise BadRequest(f"{field}: must be a valid address of at most {EMAIL_MAX} characters")
    return email
