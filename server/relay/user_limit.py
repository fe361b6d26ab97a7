"""Step 6 of a model call: the per-user model request limit (new-api's `ModelRequestRateLimit*` options,
docs/QUOTA.md#rate-limits-gcra).

`Relay.limit_rate` decides the caller's policy in its place (`user_policy`); the limit is admitted by the
reservation's own atomic step (step 12, `reserve(limits=…)`) and its success count charged by the
settlement (`settle(charges=…)`), exactly once, so with the limit on a call costs no Lua call of its own.
A call refused by steps 7–12 is admitted alone first (`admit_alone`, one Lua call on that path only), so a
caller over the limit still gets the 429 before any later refusal, and a refused call counts against the
limit as before. The limit lists of each user, key and policy are built once and remembered.
"""

from __future__ import annotations

from collections.abc import Callable

from backend.base import Limit, RateLimits
from core.settings import Settings
from quota.ratelimit import ModelRateLimiter, UserPolicy, policy_for
from server.errors import RateLimitExceeded
from server.relay.caller import AUTO_GROUP, Caller

LISTS_KEPT = 4096
"""(user, key, policy) whose limit lists a worker remembers; past it they are forgotten and built again."""


def user_policy(settings: Settings, caller: Caller) -> UserPolicy:
    """The limit of the caller's user: the options', or the caps of the key's group (the user's group for a
    key of group `auto`, whose group is not known yet)."""
    group = caller.user.group if caller.group == AUTO_GROUP else caller.group
    return policy_for(enabled=settings.rate_limit_enabled, minutes=settings.rate_limit_minutes,
                      total=settings.rate_limit_count, success=settings.rate_limit_success_count,
                      group_caps=settings.rate_limit_groups.get(group))


class UserLimits:
    """The worker's per-user limit: the lists the quota steps carry, and the admission on its own."""

    def __init__(self, backend: RateLimits, partition: Callable[[int], int]) -> None:
        self.limiter = ModelRateLimiter(backend, partition)
        self.partition = partition
        self._lists: dict[tuple[int, int, UserPolicy], tuple[list[Limit], list[Limit]]] = {}

    def lists(self, user_id: int, key_id: int, policy: UserPolicy) -> tuple[list[Limit], list[Limit]]:
        """The admission limits and success charges for this user, key and policy (keys have no TPM yet,
        so the charges do not depend on the call's tokens); built once, remembered."""
        known = self._lists.get((user_id, key_id, policy))
        if known is None:
            if len(self._lists) >= LISTS_KEPT:
                self._lists.clear()
            partition = self.partition(user_id)
            known = self._lists[(user_id, key_id, policy)] = (
                ModelRateLimiter.admission_limits(user_id=user_id, key_id=key_id, key_rpm=0, key_tpm=0,
                                                  user_policy=policy, partition=partition),
                ModelRateLimiter.usage_charges(user_id=user_id, key_id=key_id, key_tpm=0, tokens=0,
                                               success=True, user_policy=policy, partition=partition))
        return known

    async def admit_alone(self, caller: Caller, policy: UserPolicy) -> None:
        """The limit on its own (one Lua call), for a call refused before its reservation; a 429 when the
        caller is over it."""
        result = await self.limiter.admit(user_id=caller.user.id, key_id=caller.key.id, key_rpm=0, key_tpm=0,
                                          user_policy=policy)
        if not result.allowed:
            raise RateLimitExceeded(result.retry_after)
