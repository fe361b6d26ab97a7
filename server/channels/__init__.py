"""Channels: the upstream model sources an admin manages (docs/api/channels.md#channels), their abilities and
the built-in model catalog."""
