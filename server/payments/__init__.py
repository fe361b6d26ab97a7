"""Paying for top-ups online: the Stripe-compatible checkout and its signed webhook, which completes an
order and credits its quota exactly once (docs/API.md#payments)."""
