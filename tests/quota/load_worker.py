"""A separate OS process that drives the quota engine against Redis + SQL, for the invariant tests.

    python -m tests.quota.load_worker '<json config>'

Modes:
  reserve   each task makes one reservation of `amount` and keeps it (I1: overdraw under concurrency)
  cycle     each task loops reserve → settle at a random cost (≤ 2× the hold) or release (I2/I3); with
            `user_ids`, task n charges user_ids[n mod len] (spread over partitions); `iterations` 0: until
            the parent writes a second line ("stop") after "go"; `pause`: seconds between two cycles

Every outcome is printed as one JSON line and flushed at once, so a parent that kills this process with
SIGKILL knows exactly which calls returned success before it died. A settle's line carries when it was
sent and when its answer came (`sent`, `at`: wall-clock seconds). A call the store could not answer
(BackendUnavailable: a Redis failover) is a line too — `unavailable` for a reserve or release, `unknown`
with the cost for a settle whose outcome is not known — and the task goes on.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import sys
import time
from typing import Any

from backend.base import BackendUnavailable
from quota.types import InsufficientQuota
from tests.quota.env import build, consume_log


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


async def main(cfg: dict[str, Any]) -> None:
    env = build(cfg["db_url"], cfg.get("redis_url"), cfg["prefix"], lease_seconds=cfg.get("lease", 600),
                nodes=[(host, port) for host, port in cfg.get("redis_nodes", [])])
    start, stop = asyncio.Event(), asyncio.Event()

    async def reserve_once() -> None:
        await start.wait()
        try:
            r = await env.engine.reserve(cfg["user_id"], cfg["amount"], key_id=cfg.get("key_id", 0),
                                         key_limited=cfg.get("key_id", 0) > 0)
            emit(ok=r.hold_id, balance=r.user_balance)
        except InsufficientQuota as exc:
            emit(refused=exc.account, available=exc.available)

    async def cycle(task: int) -> None:
        rng = random.Random(cfg.get("seed", 0) * 1000 + task)
        users = cfg.get("user_ids") or [cfg["user_id"]]
        await start.wait()
        for n in itertools.count():
            if stop.is_set() or (cfg["iterations"] and n >= cfg["iterations"]):
                return
            try:
                key_id = cfg.get("key_id", 0)
                r = await env.engine.reserve(users[task % len(users)], cfg["amount"], key_id=key_id,
                                             key_limited=key_id > 0)
            except InsufficientQuota:
                emit(refused=True)
                continue
            except BackendUnavailable as exc:
                emit(unavailable="reserve", error=str(exc)[:160])
                continue
            emit(held=r.hold_id)
            if rng.random() < 0.2:
                try:
                    await env.engine.release(r)
                except BackendUnavailable:
                    emit(unavailable="release")
                    continue
                emit(released=r.hold_id)
                continue
            cost = rng.randint(0, 2 * cfg["amount"])
            sent = time.time()
            try:
                settled = await env.engine.settle(r, cost, log=consume_log(request_id=r.hold_id))
            except BackendUnavailable:
                emit(unknown=r.hold_id, cost=cost, user=r.user_id)
                continue
            emit(settled=r.hold_id, cost=cost, applied=settled.applied, user=r.user_id, sent=sent,
                 at=time.time())
            if cfg.get("pause"):
                await asyncio.sleep(cfg["pause"])

    async def stop_on_request() -> None:
        await asyncio.to_thread(sys.stdin.readline)
        stop.set()

    try:
        if cfg["mode"] == "reserve":
            tasks = [asyncio.create_task(reserve_once()) for _ in range(cfg["tasks"])]
        else:
            tasks = [asyncio.create_task(cycle(i)) for i in range(cfg["tasks"])]
        emit(ready=True)
        await asyncio.to_thread(sys.stdin.readline)  # the parent starts every process at once
        start.set()
        # only a worker that runs until it is stopped reads stdin again (one that ends by itself must not
        # wait there at exit: its parent may wait for it to end before closing the pipe)
        until_stopped = cfg["mode"] == "cycle" and not cfg["iterations"]
        await asyncio.gather(*tasks, *([stop_on_request()] if until_stopped else []))
        emit(done=True)
    finally:
        await env.close()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
