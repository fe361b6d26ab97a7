"""Imports every table module so that `Base.metadata` holds the whole schema (migrations, tests)."""

from models import abilities, channels, keys, logs, quota, tables
from models.base import Base

metadata = Base.metadata

__all__ = ["abilities", "channels", "keys", "logs", "metadata", "quota", "tables"]
