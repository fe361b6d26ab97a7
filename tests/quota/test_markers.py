"""The in-process store keeps its settled/released markers one lease, not an hour (quota/backends/
memory_quota.py): a repeated settle or release within that window is still recognised, and once the window
has passed the sweep forgets the markers, so the store's memory stays bounded under sustained load."""

from __future__ import annotations

from backend.memory import MemoryBackend
from quota.backends.memory_quota import MemoryQuotaStore, _Markers
from quota.types import Reservation

LEASE_MS = 120_000


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


async def _store(clock: Clock) -> MemoryQuotaStore:
    store = MemoryQuotaStore(clock, limiter=MemoryBackend(), marker_ms=LEASE_MS)
    await store.load_locked("user", 1, 1_000_000, "0-0")
    return store


async def test_a_repeated_settle_within_the_lease_changes_nothing() -> None:
    clock = Clock()
    store = await _store(clock)
    ok, *_ = await store.reserve("h1", 1, 0, False, 500, LEASE_MS)
    assert ok
    held = Reservation("h1", 1, 0, False, 500, 0, -1)
    applied, user, _ = await store.settle(held, 7, 300, {"quota": 300})
    assert applied and user == 1_000_000 - 300
    settled_at = clock.ms
    for elapsed in (0, 1, LEASE_MS // 2, LEASE_MS - 1):  # the sweep runs meanwhile, as it does every 5 s
        clock.ms = settled_at + elapsed
        await store.sweep()
        again, *_ = await store.settle(held, 7, 300, {"quota": 300})
        assert again is False
        assert await store.release(held) is False
    assert (await store.live("user", [1]))[1] == 1_000_000 - 300
    assert len(store._stream) == 1  # one usage entry, so one log


async def test_a_settle_after_a_release_within_the_lease_changes_nothing() -> None:
    clock = Clock()
    store = await _store(clock)
    await store.reserve("h2", 1, 0, False, 500, LEASE_MS)
    held = Reservation("h2", 1, 0, False, 500, 0, -1)
    assert await store.release(held) is True
    clock.ms += LEASE_MS - 1000
    await store.sweep()
    applied, *_ = await store.settle(held, 7, 300, None)
    assert applied is False
    assert (await store.live("user", [1]))[1] == 1_000_000


async def test_markers_are_forgotten_once_the_lease_has_passed() -> None:
    clock = Clock()
    store = await _store(clock)
    for n in range(1000):
        await store.reserve(f"h{n}", 1, 0, False, 1, LEASE_MS)
        await store.settle(Reservation(f"h{n}", 1, 0, False, 1, 0, -1), 7, 1, None)
        clock.ms += 10  # 100 calls/s
    assert len(store._done) == 1000
    clock.ms += LEASE_MS + 1000
    await store.sweep()
    assert len(store._done) == 0


def test_markers_expire_in_order_and_never_early() -> None:
    markers = _Markers(60_000)
    for n in range(10):
        markers.add(f"m{n}", 1_000 * n)
    markers.add("m3", 50_000)  # written again: keeps its first expiry, no second entry
    assert len(markers) == 10
    markers.expire(60_000 + 4_000)  # markers added at 0–3 s (and those sharing their second) are due
    assert all(f"m{n}" not in markers for n in range(4)) and all(f"m{n}" in markers for n in range(5, 10))
    markers.add("back", 0)  # a clock that stepped back: expires with the newest, never early
    markers.expire(60_000 + 9_000)
    assert "back" in markers and len(markers) == 2
    markers.expire(10**9)
    assert len(markers) == 0


def _engine_ids(n: int, prefix: str = "0123456789abcdef") -> list[str]:
    return [f"{prefix}{i:08x}" for i in range(n)]  # as quota/engine.py HoldIds makes them


def test_engine_hold_ids_are_bits_recognised_within_the_window_and_forgotten_after() -> None:
    markers = _Markers(60_000)
    ids = _engine_ids(100_000)
    for n, hold_id in enumerate(ids):
        markers.add(hold_id, n // 10)  # 10,000 a second
    assert len(markers) == 100_000 and not markers._ids  # all in the bitmap
    assert sum(len(b.bits) for b in markers._bits.values()) <= 100_000 // 8 + 1
    assert ids[0] in markers and ids[-1] in markers and f"{ids[0][:16]}{100_000:08x}" not in markers
    markers.expire(60_000 + 4_000)  # those of the first 4 s are due (and never more)
    assert ids[0] not in markers and ids[35_000] not in markers
    assert all(hold_id in markers for hold_id in ids[40_000:])
    markers.expire(10**9)
    assert len(markers) == 0 and not markers._bits


def test_a_late_settle_below_the_trimmed_front_is_still_recognised() -> None:
    """A hold reserved early and settled after the front moved past its counter (a long stream)."""
    markers = _Markers(60_000)
    ids = _engine_ids(1_000)
    for hold_id in ids[1:]:
        markers.add(hold_id, 0)
    markers.expire(61_000)  # everything marked at 0 is forgotten: the front passes counter 999
    assert ids[500] not in markers
    markers.add(ids[0], 61_000)  # the long call ends now
    assert ids[0] in markers
    markers.expire(61_000 + 59_000)
    assert ids[0] in markers  # kept its own minute
    markers.expire(61_000 + 61_000)
    assert ids[0] not in markers


async def test_a_repeated_settle_of_an_engine_hold_changes_nothing() -> None:
    clock = Clock()
    store = await _store(clock)
    hold_id = _engine_ids(1)[0]
    await store.reserve(hold_id, 1, 0, False, 500, LEASE_MS)
    held = Reservation(hold_id, 1, 0, False, 500, 0, -1)
    assert (await store.settle(held, 7, 300, None))[0]
    clock.ms += LEASE_MS - 1000
    await store.sweep()
    assert (await store.settle(held, 7, 300, None))[0] is False
    assert (await store.live("user", [1]))[1] == 1_000_000 - 300


def test_hold_ids_count_under_one_prefix_per_engine_and_a_forked_child_draws_its_own() -> None:
    """HoldIds: unique across engines and across a fork (a child that kept its parent's prefix and
    counter would make the parent's next hold ids again)."""
    import os

    from quota.engine import HoldIds

    ids = HoldIds()
    first, second = ids.next(), ids.next()
    assert (len(first), first[:16], int(second[16:], 16) - int(first[16:], 16)) == (24, second[:16], 1)
    assert HoldIds().next()[:16] != first[:16]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave without running anything else of pytest's
        os.write(write, ids.next().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    assert len(child) == 24 and child[:16] != first[:16]
    assert ids.next()[:16] == first[:16]  # the parent's own go on
