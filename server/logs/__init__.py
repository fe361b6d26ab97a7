"""Logs: the admin and self log routes (docs/API.md#logs) — lists, search, statistics and cleanup."""
