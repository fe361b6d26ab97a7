"""Logs: the admin and self log routes (management.md E) — lists, search, statistics and cleanup."""
