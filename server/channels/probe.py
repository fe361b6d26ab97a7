"""`ChannelProbes`, the channel routes that ask a channel's upstream something
(docs/api/channels.md#channel-tests-balances-and-model-lists): test one channel, test every channel in the
background (and tell how far a run has come), list an upstream's models (a saved channel's, or unsaved
settings'). Balances are the service of balances.py.

- **A test** is one small real request through the channel's provider (`UpstreamAdmin.test`), made the
  way a model call would make it: the same key choice (a multi-key channel's random or polling pick among
  its enabled keys), the same model mapping, the same header override and destination policy. The model
  is the one asked for, else the channel's `test_model`, else the first of its `models`. A success
  records `test_time` and `response_time` (ms); a single test never changes a status and charges
  nothing. A failure is a 502 carrying the upstream's redacted message.
- **Test every channel** covers every channel but those an admin disabled (status 2), four at a time, in
  a task the worker owns (named `channel-test-all`, asked to stop on shutdown), and answers at once. One
  run at a time in the whole deployment (a lock shared by every worker and node, held until the run
  ends): a second one is a 409. Then, by the options: a failure the automatic-disable rules act on (the
  gateway's, docs/api/channels.md#auto-disable), or an answer slower than `ChannelDisableThreshold` seconds,
  of an enabled channel with `auto_ban` 1 disables it (status 3; of a multi-key channel, the key tested) when
  `AutomaticDisableChannelEnabled`; a passing test of a status-3 channel enables it again (and the key
  tested) when `AutomaticEnableChannelEnabled`. Every status change is committed, then announced, so it
  routes at once on every worker and node. How far it has come (and how the last run ended, with its
  first failures) is published as it moves (`runs.py` `Progress`, `GET /api/channel/progress?run=test`).
- **Model lists** use the channel's first enabled key (Gemini: every page of `/v1beta/models`; any other
  type: OpenAI's `/v1/models`) and never write anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from backend.base import KeyValue
from backend.locks import Busy, exclusive
from core.enums import ChannelRun, ChannelStatus
from core.multikey import MultiKeyState
from models.channels import Channel, ChannelRepository, split_list
from models.db import Database
from server import metrics
from server.channels.destination import KeyDestinations
from server.channels.key_rules import UNREADABLE_KEYS, key_lines, keys_of, set_status
from server.channels.probe_schemas import RunProgress
from server.channels.rules import clean_fields
from server.channels.runs import Progress, each, lock_ttl, read_progress, until_stopped
from server.clock import Clock
from server.components.catalog import capabilities, type_name
from server.components.channel_table import ChannelTable, RoutedChannel, choose_key, map_model
from server.components.options import Options
from server.crypto import SecretBox
from server.errors import BadRequest, Conflict, NotFound, UpstreamFailed
from server.metrics import DisableReason
from server.upstream.admin import Tested, UpstreamAdmin

log = logging.getLogger("tollway.channels")

TEST_LOCK = "lock:channel-test"
TEST_TASK = "channel-test-all"
TEST_CONCURRENCY = 4
TEST_PASSED = "a channel test passed"
RUNNING = "a test of every channel is already running"


class TaskOwner(Protocol):
    """The worker's owner of background tasks (`server/context.py` `Tasks`): named, drained on shutdown."""

    def start(self, name: str, coro: Coroutine[Any, Any, Any], *, stop: Callable[[], None] | None = None
              ) -> None: ...

    @property
    def names(self) -> list[str]: ...


def first_key(channel: RoutedChannel) -> int:
    """The first enabled key, else the first key (a channel whose keys are all disabled is still listed)."""
    enabled = channel.enabled_keys()
    return enabled[0] if enabled else 0


class ChannelProbes:
    """Channel tests (one, or every channel in the background), run progress, upstream model lists."""

    def __init__(self, *, db: Database, channels: ChannelTable, box: SecretBox, options: Options,
                 destinations: KeyDestinations, backend: KeyValue, admin: UpstreamAdmin, tasks: TaskOwner,
                 clock: Clock) -> None:
        self.db = db
        self.channels = channels
        self.box = box  # reads a multi-key channel's keys when a test enables it again
        self.options = options
        self.destinations = destinations
        self.backend = backend  # the cluster-wide lock of a run, its progress, the polling key choice
        self.admin = admin  # the upstream calls made for an admin: tests and model lists
        self.tasks = tasks  # owns the background run of "test every channel"
        self.clock = clock

    # ---- one channel ------------------------------------------------------------------------------------

    async def _routed(self, channel_id: int) -> tuple[Channel, RoutedChannel]:
        async with self.db.transaction() as tx:
            row = await ChannelRepository(tx).get(channel_id)
        if row is None:
            raise NotFound("channel not found")
        routed = self.channels.routed(row)
        if not routed.keys:
            raise Conflict(UNREADABLE_KEYS)
        return row, routed

    async def test_channel(self, channel_id: int, model: str) -> float:
        """`GET /api/channel/test/:id` → the seconds the test took; 400 for a type that cannot be tested,
        404, 502 with the upstream's (redacted) message and `time` 0."""
        row, routed = await self._routed(channel_id)
        if not self.admin.testable(routed.type):
            raise BadRequest(f"type: channels of type {type_name(routed.type)} ({routed.type}) cannot be "
                             "tested")
        tested, _ = await self._test(routed, model or _default_model(row))
        if not tested.ok:
            raise UpstreamFailed(tested.message, fields={"time": 0})
        await self._record_test(routed.id, tested.seconds)
        return tested.seconds

    async def _test(self, channel: RoutedChannel, model: str) -> tuple[Tested, int]:
        """One test of `channel` with `model` (the requested name, mapped as a call would map it) → the
        verdict and the index of the key used."""
        key_index = await choose_key(channel, self.backend) if channel.enabled_keys() else _revivable(channel)
        settings = self.options.settings
        target = self.admin.target(channel.type, channel.base_url, channel.header_override)
        upstream_model = map_model(channel.model_mapping, model)  # the request suits what the upstream serves
        tested = await self.admin.test(target, channel.keys[key_index], upstream_model,
                                       capabilities(upstream_model, settings.model_capabilities), settings,
                                       known=channel.keys)
        return tested, key_index

    async def _record_test(self, channel_id: int, seconds: float) -> None:
        async with self.db.transaction() as tx:
            await ChannelRepository(tx).record_test(channel_id, self.clock.now_s(), round(seconds * 1000))

    # ---- every channel ----------------------------------------------------------------------------------

    async def start_test_all(self) -> None:
        """`GET /api/channel/test`: start testing every channel but status 2 in the background; 409 while
        a run is in progress anywhere (see the module docstring)."""
        if TEST_TASK in self.tasks.names:
            raise Conflict(RUNNING)
        async with self.db.transaction() as tx:
            rows = await ChannelRepository(tx).with_statuses(
                (ChannelStatus.ENABLED, ChannelStatus.AUTO_DISABLED))
        ttl = lock_ttl(len(rows), TEST_CONCURRENCY, self.admin.timeout)
        lock = contextlib.AsyncExitStack()
        try:
            await lock.enter_async_context(exclusive(self.backend, TEST_LOCK, ttl=ttl))
        except Busy:
            raise Conflict(RUNNING) from None
        stop = asyncio.Event()
        try:
            ids = [r.id for r in rows if self.admin.testable(r.type)]
            progress = Progress.start(self.backend, ChannelRun.TEST, len(ids), self.clock.now_s(), ttl)
            await progress.publish()  # before the reply: a progress read that follows sees this run
            self.tasks.start(TEST_TASK, self._test_all(ids, lock, stop, progress), stop=stop.set)
        except BaseException:
            await lock.aclose()
            raise

    async def _test_all(self, ids: list[int], lock: contextlib.AsyncExitStack, stop: asyncio.Event,
                        progress: Progress) -> None:
        try:
            async def step(channel_id: int) -> None:
                await self._test_and_judge(channel_id, stop, progress)

            await each(ids, TEST_CONCURRENCY, step, stop)
            state = progress.state
            log.info("channel test run: %d of %d channels tested%s", state.passed + state.failed, len(ids),
                     " (stopped)" if stop.is_set() else "")
        finally:
            try:
                await progress.finish(self.clock.now_s())
            finally:
                await lock.aclose()

    async def _test_and_judge(self, channel_id: int, stop: asyncio.Event, progress: Progress) -> None:
        """Test one channel of a run, change its status as the options say, and count it in `progress`."""
        async with self.db.transaction() as tx:
            row = await ChannelRepository(tx).get(channel_id)
        if row is None or row.status == ChannelStatus.MANUALLY_DISABLED:  # deleted or disabled meanwhile
            return await progress.skipped_one()
        channel = self.channels.routed(row)
        if not self.admin.testable(channel.type):
            return await progress.skipped_one()
        if not channel.keys:
            return await progress.failed_one(row.id, row.name, UNREADABLE_KEYS)
        result = await until_stopped(self._test(channel, _default_model(row)), stop)
        if result is None:
            return await progress.skipped_one()
        tested, key_index = result
        settings = self.options.settings
        slow = tested.ok and tested.seconds > settings.channel_disable_threshold
        if tested.ok:
            await self._record_test(channel.id, tested.seconds)
        if (tested.disables or slow) and channel.status == ChannelStatus.ENABLED and channel.auto_ban \
                and settings.automatic_disable_channel_enabled:
            reason = (f"channel test: the answer took {tested.seconds:.2f} s, over the "
                      f"{settings.channel_disable_threshold:g} s threshold" if slow
                      else f"channel test: {tested.message}")
            why = DisableReason.TEST_SLOW if slow else DisableReason.TEST_FAILED
            await self.channels.auto_disable(channel, key_index if channel.multi_key else None, reason[:255],
                                             why=why)
        elif tested.ok and not slow and channel.status == ChannelStatus.AUTO_DISABLED \
                and settings.automatic_enable_channel_enabled:
            await self._auto_enable(channel.id, key_index)
        if tested.ok and not slow:
            await progress.passed_one()
        else:
            await progress.failed_one(row.id, row.name, f"the answer took {tested.seconds:.2f} s, over the "
                                      f"{settings.channel_disable_threshold:g} s threshold" if slow
                                      else tested.message)

    async def run_progress(self, run: ChannelRun) -> RunProgress:
        """`GET /api/channel/progress?run=` → how far a run in progress has come, or how the last one
        ended (every count 0 when none is known)."""
        return RunProgress.of(await read_progress(self.backend, run))

    async def _auto_enable(self, channel_id: int, key_index: int) -> None:
        """A status-3 channel that passed a test → 1 (a multi-key channel's key tested → 1 as well), with
        its abilities; announced after the commit."""
        now = self.clock.now_s()
        async with self.db.transaction() as tx:
            repo = ChannelRepository(tx)
            channel = await repo.get_for_update(channel_id)
            if channel is None or channel.status != ChannelStatus.AUTO_DISABLED:
                return
            info = MultiKeyState.parse(channel.channel_info)
            if info.is_multi_key:
                info.size = len(keys_of(self.box, channel))
                if info.status(key_index) == ChannelStatus.AUTO_DISABLED:
                    info.set_status(key_index, ChannelStatus.ENABLED, "", now)
                    channel.channel_info = info.dump()
                if not info.has_enabled_key():
                    return
            set_status(channel, ChannelStatus.ENABLED, TEST_PASSED, now)
            await repo.save(channel)
        metrics.auto_enabled()
        log.warning("channel %d enabled again: %s", channel_id, TEST_PASSED)
        await self.channels.changed()

    # ---- upstream model lists ---------------------------------------------------------------------------

    async def fetch_models(self, channel_id: int) -> list[str]:
        """`GET /api/channel/fetch_models/:id` → the upstream's model ids, asked with the channel's first
        enabled key, address and header override."""
        _, channel = await self._routed(channel_id)
        target = self.admin.target(channel.type, channel.base_url, channel.header_override)
        return await self.admin.models(target, channel.keys[first_key(channel)], known=channel.keys)

    async def fetch_models_unsaved(self, *, channel_type: int, base_url: str | None, key: str) -> list[str]:
        """`POST /api/channel/fetch_models` → the model ids an upstream lists for settings not saved yet:
        the first key line (trimmed) and `base_url`, empty meaning the type's default."""
        fields: dict[str, Any] = clean_fields({"type": channel_type, "base_url": base_url or ""},
                                              creating=False)
        keys = key_lines(key)
        if not keys:
            raise BadRequest("key: is required")
        await self.destinations.check_base_url(fields["base_url"])
        target = self.admin.target(fields["type"], fields["base_url"])
        return await self.admin.models(target, keys[0])


def _default_model(row: Channel) -> str:
    """A test's model when none is asked for: `test_model`, else the first of `models` ("" when none:
    the test is then the model list)."""
    models = split_list(row.models)
    return (row.test_model or "").strip() or (models[0] if models else "")


def _revivable(channel: RoutedChannel) -> int:
    """The key a channel with no enabled key is tested with: the first the system disabled, else the
    first (an admin's own disabling is never undone by a test)."""
    for index, status in enumerate(channel.key_status):
        if status == ChannelStatus.AUTO_DISABLED:
            return index
    return 0
