"""The rate-limit strategy of the quota engine for model calls: per-key requests and tokens per minute,
and the per-user model request limit of new-api (docs/api/gateway.md#gateway-admission-order, step 6), over
any store with `RateLimits` (backend/base.py).

Before a call, `admit` checks every limit in ONE atomic GCRA step (`RateLimits.gcra_many`): all are checked,
and only when all admit is anything charged. After the call, `record` charges what the call really used.

    key                     limit                                  admit             record
    rl:{p}:key:{id}:rpm     key RPM requests / minute              1                 -
    rl:{p}:key:{id}:tpm     key TPM tokens / minute                peek              the tokens (forced)
    rl:{p}:user:{id}:total  `Count` calls / `DurationMinutes`      1 (failures too)  -
    rl:{p}:user:{id}:ok     `SuccessCount` calls / `DurationMinutes`  peek           1 on success (forced)

`{p}` is the hash tag of the user's partition (quota/partitions.py; a key's is its owner's): the limits
are charged in the same script as the user's reservation, which touches that partition's keys only.

A peek (cost 0) refuses once nothing is left and charges nothing, so concurrent calls in flight can
overshoot a tokens or success limit by what they use (as in new-api); the forced charge afterwards makes
the following calls wait for it. A refusal is answered 429 `rate_limit_exceeded` with
`Retry-After: ceil(retry_after)` (docs/api/gateway.md#gateway-admission-order); `RateResult.refused_by` names
the limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from backend.base import Limit, RateLimits, RateResult
from quota.partitions import tag

MINUTE = 60.0

ENABLED = "ModelRequestRateLimitEnabled"
DURATION_MINUTES = "ModelRequestRateLimitDurationMinutes"
COUNT = "ModelRequestRateLimitCount"
SUCCESS_COUNT = "ModelRequestRateLimitSuccessCount"
GROUPS = "ModelRequestRateLimitGroup"


@dataclass(frozen=True, slots=True)
class UserPolicy:
    """The per-user model request limit that applies to one call: caps per `period` seconds (0 = none)."""

    period: float = MINUTE
    total: int = 0  # calls admitted, failed ones included
    success: int = 0  # calls that succeeded

    @property
    def limited(self) -> bool:
        return self.total > 0 or self.success > 0


NO_USER_LIMIT = UserPolicy()


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    return bool(value)


def _count(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _group_caps(groups: Any, group: str) -> tuple[int, int] | None:
    """`[total, success]` of `group` in `ModelRequestRateLimitGroup`, if it is there and well formed."""
    if isinstance(groups, str):
        try:
            groups = json.loads(groups) if groups.strip() else {}
        except ValueError:
            return None
    if not isinstance(groups, Mapping):
        return None
    pair = groups.get(group)
    if (not isinstance(pair, list | tuple) or len(pair) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in pair)):
        return None
    return max(0, pair[0]), max(0, pair[1])


def user_policy(options: Mapping[str, Any], group: str) -> UserPolicy:
    """The per-user limit for a call in `group` (the key's group if set, else the user's), from the
    option values: disabled → none; a group listed in `ModelRequestRateLimitGroup` takes its
    `[total, success]` instead of `Count` / `SuccessCount`; 0 means no cap."""
    return policy_for(enabled=_flag(options.get(ENABLED, False)),
                      minutes=_count(options.get(DURATION_MINUTES, 1), 1),
                      total=_count(options.get(COUNT, 0), 0),
                      success=_count(options.get(SUCCESS_COUNT, 1000), 1000),
                      group_caps=_group_caps(options.get(GROUPS), group))


def policy_for(*, enabled: bool, minutes: int, total: int, success: int, group_caps: tuple[int, int] | None
               ) -> UserPolicy:
    """The same from typed values: `group_caps` is the `[total, success]` the call's group has in
    `ModelRequestRateLimitGroup`, if any (it replaces `total` and `success`)."""
    if not enabled:
        return NO_USER_LIMIT
    if group_caps is not None:
        total, success = group_caps
    return UserPolicy(max(1, minutes) * MINUTE, max(0, total), max(0, success))


def _key_rpm(p: str, key_id: int, rpm: int) -> Limit:
    return Limit(f"rl:{p}:key:{key_id}:rpm", rpm, MINUTE, 1)


def _key_tpm(p: str, key_id: int, tpm: int, tokens: int) -> Limit:
    return Limit(f"rl:{p}:key:{key_id}:tpm", tpm, MINUTE, tokens)


def _user_total(p: str, user_id: int, policy: UserPolicy) -> Limit:
    return Limit(f"rl:{p}:user:{user_id}:total", policy.total, policy.period, 1)


def _user_success(p: str, user_id: int, policy: UserPolicy, cost: int) -> Limit:
    return Limit(f"rl:{p}:user:{user_id}:ok", policy.success, policy.period, cost)


class ModelRateLimiter:
    """Admits model calls against the key's and the user's limits; 0 (or less) disables a limit.
    `partition_of`: the partition of a user id (`QuotaEngine.partition`)."""

    def __init__(self, backend: RateLimits, partition_of: Callable[[int], int]) -> None:
        self.backend = backend
        self.partition_of = partition_of

    async def admit(self, *, user_id: int, key_id: int, key_rpm: int, key_tpm: int,
                    user_policy: UserPolicy) -> RateResult:
        """One atomic check of every limit; on admission the request counters are charged 1."""
        return await self.backend.gcra_many(self.admission_limits(
            user_id=user_id, key_id=key_id, key_rpm=key_rpm, key_tpm=key_tpm, user_policy=user_policy,
            partition=self.partition_of(user_id)))

    async def record(self, *, user_id: int, key_id: int, key_tpm: int, tokens: int, success: bool,
                     user_policy: UserPolicy) -> None:
        """After an admitted call: charge its tokens to the key's TPM and, if it succeeded, one success to
        the user (both forced, in one step: the usage happened, whatever the limits say now)."""
        charges = self.usage_charges(user_id=user_id, key_id=key_id, key_tpm=key_tpm, tokens=tokens,
                                     success=success, user_policy=user_policy,
                                     partition=self.partition_of(user_id))
        if charges:
            await self.backend.gcra_charge(*charges)

    @staticmethod
    def admission_limits(*, user_id: int, key_id: int, key_rpm: int, key_tpm: int, user_policy: UserPolicy,
                         partition: int) -> list[Limit]:
        """What `admit` checks, for `QuotaEngine.reserve(limits=…)`: the admission in the reservation's
        own step (one Lua call instead of two). `partition`: the user's."""
        p = tag(partition)
        return [
            _key_rpm(p, key_id, key_rpm),
            _key_tpm(p, key_id, key_tpm, 0),
            _user_total(p, user_id, user_policy),
            _user_success(p, user_id, user_policy, 0),
        ]

    @staticmethod
    def usage_charges(*, user_id: int, key_id: int, key_tpm: int, tokens: int, success: bool,
                      user_policy: UserPolicy, partition: int) -> list[Limit]:
        """What `record` charges, for `QuotaEngine.settle(charges=…)`: in the settlement's own step, and
        so exactly once. `partition`: the user's."""
        p = tag(partition)
        charges: list[Limit] = []
        if key_tpm > 0 and tokens > 0:
            charges.append(_key_tpm(p, key_id, key_tpm, tokens))
        if success and user_policy.success > 0:
            charges.append(_user_success(p, user_id, user_policy, 1))
        return charges
