"""Redemption codes: the admin's codes and a user redeeming one for quota, exactly once
(docs/api/payments.md#redemption-codes)."""
