"""Top-up records: the admin's list of every order, a user's own, and an admin completing an order,
which credits its quota exactly once (docs/api/payments.md#top-up-records)."""
