"""The largest amount of quota a balance may hold, for the layers that cannot import the quota engine.

The quota stores compute in Lua numbers (doubles), exact only within ±2^53, so a balance is kept within
`BALANCE_MAX` = 2^53 − 1. `quota/types.py` names the same number for the engine (quota/ imports nothing
from core/; tests/test_quota_options.py checks that the two agree). Every option whose value becomes
quota is bounded by it (core/option_registry.py), so no setting alone can make a balance the engine
cannot hold; a sum of them (a new user's starting balance) is limited where it is added.
"""

from __future__ import annotations

BALANCE_MAX = 2**53 - 1
