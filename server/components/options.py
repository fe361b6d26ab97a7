"""The live option values of a worker: loaded from SQL, typed by the registry, reloaded on every
worker as soon as one of them changes a value (the `options` version is bumped and a hint broadcast, on
which every worker reads the counter; a worker shown a newer version by a reservation or a management
request reloads first — backend/versions.py).

Each reload also builds `settings`, the typed frozen snapshot (`core/settings.py`) that every reader of a
particular option uses; the raw values (`current`, `text`, `visible`) serve the generic option routes."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from sqlalchemy.exc import IntegrityError

from backend.versions import OPTIONS, VersionTracker
from core.option_registry import REGISTRY, OptionError, normalize, parse, to_text
from core.settings import Settings
from models.db import Database
from models.system import OptionRepository
from server.crypto import SecretBox

# switches that cannot be turned on while the option they rely on is empty (docs/api/options.md#options)
_NEEDS = {"EmailVerificationEnabled": "SMTPServer"}


class Options:
    def __init__(self, db: Database, box: SecretBox, versions: VersionTracker) -> None:
        self.db = db
        self.versions = versions
        versions.register(OPTIONS, self.reload)
        self.box = box
        self._values: dict[str, Any] = {spec.key: spec.default for spec in REGISTRY.values()}
        self._texts: dict[str, str] = {}
        self.settings = Settings.of(self._values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    @property
    def current(self) -> Mapping[str, Any]:
        """Every typed value (a snapshot replaced whole on reload, never mutated), for the generic option
        routes; code that reads a particular option reads `settings`."""
        return self._values

    def text(self, key: str) -> str:
        """The string form as `GET /api/option/` shows it."""
        return self._texts[key]

    async def reload(self) -> None:
        async with self.db.transaction() as tx:
            stored = await OptionRepository(tx).all()
        values: dict[str, Any] = {}
        texts: dict[str, str] = {}
        for key, spec in REGISTRY.items():
            raw = stored.get(key)
            if raw is not None and spec.secret:
                raw = self._reveal(raw)
            text = raw if raw is not None else to_text(spec, spec.default)
            texts[key] = text
            values[key] = parse(spec, text)
        self._values, self._texts, self.settings = values, texts, Settings.of(values)

    def _reveal(self, stored: str) -> str | None:
        try:
            return self.box.decrypt(stored)
        except (ValueError, InvalidTag):  # a value encrypted under another SECRET_KEY
            return None

    async def put(self, key: str, value: Any) -> None:
        """Validate, store (secrets encrypted), reload here and tell every other worker."""
        text = normalize(key, value)
        if key in _NEEDS:
            await self.reload()  # judge against the stored values, not a copy another worker outdated
            needs = _NEEDS[key]
            if text == "true" and not self._values.get(needs):
                raise OptionError(f"{key}: set {needs} first")
        stored = self.box.encrypt(text) if REGISTRY[key].secret else text
        async with self.db.transaction() as tx:
            await OptionRepository(tx).put(key, stored)
        await self.changed()

    async def edit_json(self, edits: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
        """Change several JSON options in one transaction, each read and rewritten under its row's lock:
        two edits at once (of other entries of the same option) both stay. Each new value is checked
        by the option's rule (`OptionError` naming the key); a stored value that is not a JSON object reads
        as {}."""
        keys = sorted(edits)
        for spec in (REGISTRY[key] for key in keys):
            assert spec.kind == "json" and not spec.secret, spec.key
        for attempt in range(2):
            try:
                async with self.db.transaction() as tx:
                    repo = OptionRepository(tx)
                    stored = await repo.locked(keys)
                    for key in keys:
                        spec = REGISTRY[key]
                        current = parse(spec, stored[key]) if key in stored else spec.default
                        current = dict(current) if isinstance(current, dict) else {}
                        text = normalize(key, json.dumps(edits[key](current)))
                        if key in stored:
                            await repo.put(key, text)
                        else:  # never an update here: a row committed since the read would be overwritten
                            await repo.insert(key, text)
                break
            except IntegrityError:  # two first writes of an option never stored: the loser reads it now
                if attempt:
                    raise
        await self.changed()

    async def changed(self) -> None:
        """After a committed change: bump the version, reload here and tell every other worker."""
        await self.versions.changed(OPTIONS)

    def visible(self) -> list[tuple[str, str]]:
        """Every option but the secrets, as (key, stored text) in the registry's order."""
        return [(key, self._texts[key]) for key, spec in REGISTRY.items() if not spec.secret]

