"""Channels: the upstream model sources an admin manages (docs/API.md#channels), their abilities and the
built-in model catalog."""
