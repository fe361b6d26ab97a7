"""Read-your-writes for the state every worker caches in memory, without asking the store on each call.

Workers keep three kinds of shared state in memory: the routing table (`channels`), the option values
(`options`) and the record memos of users, access tokens and API keys (`records`). A broadcast tells
the other workers about a change, but it arrives some milliseconds after the writer answered; a caller
who got the writer's 200 and at once calls another worker must still see the change.

So each kind has a version counter in the shared store. A writer, after its commit (and after it dropped
the shared copy of a record), bumps the counter and only then answers. The reservation every model call
makes anyway returns the counters (no extra round trip); a worker that holds an older version than the
one it was shown catches up first (reloads the table or the options, forgets its record memos) and
re-runs its admission. A refusal decided on cached state, and every management request, pays one read
of the counters instead.

On Redis each partition of the quota state (quota/partitions.py) keeps a copy of the counters, which its
reservations read (so a reservation still touches one hash slot); a bump raises every copy to the counters
before the writer answers, a copy only ever takes values read from the counters and never falls, so what a
reservation returns is never above the counters. Readers of "the versions" (management requests, the
catch-up after a hint) read the counters themselves.

The counters only grow: the first bump after the store lost them (a Redis restart without persistence)
starts every counter at the store's clock in microseconds, above any value handed out before.

The catch-up rule: the version a worker holds is always a number it read from its own store (the
counters, the reservation's copy of them, or its own bump), never a number it heard on pub/sub. A
broadcast (`options:<v>`, `channels:<v>`) is only a hint that something changed: on one, the worker reads
the counters (one round trip) and catches up to those; the number in the message is ignored. A number
from elsewhere — another deployment on the same Redis server, a forged or replayed message — could be
higher than anything this store will hand out for a long time, and a worker holding it would ignore
every later change of its own deployment. For the same reason a forced reload (this worker's own change,
a resubscription after Redis came back) sets what it holds to exactly the value it read, even when that
is lower: a store restored from an older snapshot goes on being followed.

`VersionTracker` is this worker's side: which version of each kind it holds, the reload of each kind,
one reload at a time per kind (concurrent callers wait for the one in progress, bounded by a deadline;
a reload that failed leaves the old state in use and is retried no sooner than a second later).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from backend.observer import ReloadObserver, ignore_reload

if TYPE_CHECKING:
    from backend.broadcasts import Broadcasts

log = logging.getLogger("tollway.versions")

CHANNELS, OPTIONS, RECORDS = "channels", "options", "records"
NAMES: tuple[str, str, str] = (CHANNELS, OPTIONS, RECORDS)
Versions = tuple[int, int, int]  # in the order of NAMES
UNKNOWN: Versions = (0, 0, 0)

RELOAD_DEADLINE = 5.0  # seconds a caller waits for a reload before it goes on with what it has
RETRY_AFTER_FAILURE = 1.0


class VersionStore(Protocol):
    async def versions(self) -> Versions:
        """The current counters (0 for one never bumped)."""
        ...

    async def bump(self, name: str) -> int:
        """Increment the counter `name`; returns its new value."""
        ...


class VersionTracker:
    """`on_reload` (backend/observer.py) is told the kind of every reload that catching up, a change or a
    resynchronisation ran and that succeeded (not the first load at `start`)."""

    def __init__(self, store: VersionStore, *, clock: Callable[[], float] = time.monotonic,
                 on_reload: ReloadObserver = ignore_reload) -> None:
        self.store = store
        self._clock = clock
        self.on_reload = on_reload
        self.known: dict[str, int] = dict.fromkeys(NAMES, 0)
        self._reloaders: dict[str, Callable[[], Awaitable[None]]] = {}
        self._locks = {name: asyncio.Lock() for name in NAMES}
        self._failed_at: dict[str, float] = {}
        self._broadcasts: Broadcasts | None = None

    def register(self, name: str, reload: Callable[[], Awaitable[None]]) -> None:
        if name not in NAMES:
            raise ValueError(f"unknown versioned state {name!r}")
        self._reloaders[name] = reload

    async def start(self) -> None:
        """At start: read the counters, then load everything (a failure here fails the start)."""
        seen = await self.store.versions()
        for reload in self._reloaders.values():
            await reload()
        for name, version in zip(NAMES, seen, strict=True):
            self.known[name] = version

    def held(self) -> Versions:
        return (self.known[CHANNELS], self.known[OPTIONS], self.known[RECORDS])

    @staticmethod
    def newer(seen: Versions, than: Versions) -> bool:
        """Does `seen` name a newer version of anything than `than`? A decision taken on state held as
        of `than` (take `held()` before deciding) is current only if nothing newer was seen after it:
        comparing with what the worker holds by then would miss a reload that finished meanwhile."""
        return seen[0] > than[0] or seen[1] > than[1] or seen[2] > than[2]

    async def catch_up(self, seen: Versions) -> bool:
        """Reload every kind whose version in `seen` is newer than the one held; True if any was."""
        behind = False
        for name, version in zip(NAMES, seen, strict=True):
            if version > self.known[name]:
                behind = True
                await self._reload(name, version)
        return behind

    async def refresh(self, since: Versions | None = None) -> bool:
        """Read the counters (one round trip) and catch up; True if anything is newer than `since`
        (what a decision was taken on), or than what this worker held when `since` is not given."""
        seen = await self.store.versions()
        basis = since if since is not None else self.held()
        await self.catch_up(seen)
        return self.newer(seen, basis)

    async def changed(self, name: str) -> None:
        """After a committed change of `name` (shared copies already dropped): bump the counter, reload
        here, and broadcast a hint. Every caller answered after this sees the change."""
        version = await self.store.bump(name)
        await self._reload(name, version, force=True)
        if self._broadcasts is not None:
            # the number is for a human watching the channel; receivers read the counters instead
            await self._broadcasts.publish(f"{name}:{version}")

    async def hinted(self) -> None:
        """A broadcast said something changed: read the counters and catch up to them. Whatever number
        the message carried is not trusted (see the module docstring)."""
        await self.refresh()

    def listen(self, broadcasts: Broadcasts) -> None:
        """Take the version broadcasts as hints (and send ours through them), and reload everything after
        a (re)subscription."""
        self._broadcasts = broadcasts

        async def hint(_message: str) -> None:
            await self.hinted()

        for name in (CHANNELS, OPTIONS):
            broadcasts.register(f"{name}:", hint)
        broadcasts.on_resubscribe(self.resync)

    async def resync(self) -> None:
        """After a (re)subscription, when broadcasts may have been lost and the store may have restarted
        (even from an older snapshot): reload everything, and hold exactly the counters read now."""
        seen = await self.store.versions()
        for name, version in zip(NAMES, seen, strict=True):
            await self._reload(name, version, force=True)

    async def _reload(self, name: str, version: int, *, force: bool = False) -> None:
        """Reload `name` and hold `version`, a value read from the store before the reload. Without
        `force`, only if `version` is newer than the one held; with it, always, and the held version is
        set to `version` even if lower (never above the store's: see the module docstring)."""
        reload = self._reloaders.get(name)
        if reload is None:
            self.known[name] = version if force else max(self.known[name], version)
            return
        lock = self._locks[name]
        try:
            async with asyncio.timeout(RELOAD_DEADLINE):
                async with lock:
                    if not force and version <= self.known[name]:
                        return  # the reload this caller waited for already brought it
                    failed = self._failed_at.get(name)
                    if not force and failed is not None and self._clock() - failed < RETRY_AFTER_FAILURE:
                        return
                    try:
                        await reload()
                    except Exception:
                        self._failed_at[name] = self._clock()
                        log.exception("could not reload %s (version %d); using what this worker holds",
                                      name, version)
                        return
                    self._failed_at.pop(name, None)
                    self.known[name] = version  # newer than the one held unless forced
                    self.on_reload(name)
        except TimeoutError:
            log.warning("reload of %s took longer than %.0f s; going on with what this worker holds",
                        name, RELOAD_DEADLINE)
