"""Imports every table module so that `Base.metadata` holds the whole schema (migrations, tests)."""

from models import (
    abilities,
    channels,
    credits,
    keys,
    logs,
    payments,
    quota,
    quota_data,
    redemptions,
    tables,
    topups,
)
from models.base import Base

metadata = Base.metadata

__all__ = ["abilities", "channels", "credits", "keys", "logs", "metadata", "payments", "quota", "quota_data",
           "redemptions", "tables", "topups"]
