"""Channels: the upstream model sources an admin manages (management.md C), their abilities and the
built-in model catalog."""
