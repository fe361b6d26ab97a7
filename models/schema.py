"""Imports every table module so that `Base.metadata` holds the whole schema (migrations, tests)."""

from models import channels, keys, logs, quota, tables
from models.base import Base

metadata = Base.metadata

__all__ = ["channels", "keys", "logs", "metadata", "quota", "tables"]
