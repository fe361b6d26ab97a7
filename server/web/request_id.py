"""`X-Request-Id`: the caller's if it is well-formed, else a fresh one of 32 hex characters.

A fresh id is this worker's random prefix (16 hex characters, drawn once per process) followed by a
counter (16 hex characters): unique across workers and nodes like a random one, without a call for
randomness (a system call) per request. It is logged and echoed, never used to deduplicate anything.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets

_VALID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class _Ids:
    __slots__ = ("counter", "prefix")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.prefix = secrets.token_hex(8)
        self.counter = itertools.count(secrets.randbelow(2**32))

    def fresh(self) -> str:
        return f"{self.prefix}{next(self.counter) & 0xFFFF_FFFF_FFFF_FFFF:016x}"


_IDS = _Ids()
os.register_at_fork(after_in_child=_IDS.reset)  # a forked worker draws its own prefix


def request_id_from(header: str | None) -> str:
    if header and _VALID.fullmatch(header):
        return header
    return _IDS.fresh()
