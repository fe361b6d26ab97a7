"""A separate OS process that drives the quota engine against Redis + SQL, for the invariant tests.

    python -m tests.quota.load_worker '<json config>'

Modes:
  reserve   each task makes one reservation of `amount` and keeps it (I1: overdraw under concurrency)
  cycle     each task loops reserve → settle at a random cost (≤ 2× the hold) or release (I2/I3); with
            `user_ids`, task n charges user_ids[n mod len] (spread over partitions)

Every outcome is printed as one JSON line and flushed at once, so a parent that kills this process with
SIGKILL knows exactly which calls returned success before it died.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from typing import Any

from quota.types import InsufficientQuota
from tests.quota.env import build, consume_log


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


async def main(cfg: dict[str, Any]) -> None:
    env = build(cfg["db_url"], cfg.get("redis_url"), cfg["prefix"], lease_seconds=cfg.get("lease", 600),
                nodes=[(host, port) for host, port in cfg.get("redis_nodes", [])])
    start = asyncio.Event()

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
        for _ in range(cfg["iterations"]):
            try:
                key_id = cfg.get("key_id", 0)
                r = await env.engine.reserve(users[task % len(users)], cfg["amount"], key_id=key_id,
                                             key_limited=key_id > 0)
            except InsufficientQuota:
                emit(refused=True)
                continue
            emit(held=r.hold_id)
            if rng.random() < 0.2:
                await env.engine.release(r)
                emit(released=r.hold_id)
                continue
            cost = rng.randint(0, 2 * cfg["amount"])
            settled = await env.engine.settle(r, cost, log=consume_log(request_id=r.hold_id))
            emit(settled=r.hold_id, cost=cost, applied=settled.applied)

    try:
        if cfg["mode"] == "reserve":
            tasks = [asyncio.create_task(reserve_once()) for _ in range(cfg["tasks"])]
        else:
            tasks = [asyncio.create_task(cycle(i)) for i in range(cfg["tasks"])]
        emit(ready=True)
        await asyncio.to_thread(sys.stdin.readline)  # the parent starts every process at once
        start.set()
        await asyncio.gather(*tasks)
        emit(done=True)
    finally:
        await env.close()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
