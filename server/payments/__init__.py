"""Paying for top-ups online: the Stripe-compatible checkout and its signed webhook, which completes an
order and credits its quota exactly once (docs/api/payments.md#payments)."""
