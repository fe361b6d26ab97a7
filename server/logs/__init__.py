"""Logs: the admin and self log routes (docs/api/logs.md#logs) — lists, search, statistics and cleanup."""
