"""Imports every table module so that `Base.metadata` holds the whole schema (migrations, tests)."""

from models import (
    abilities,
    channels,
    credits,
    deployment,
    keys,
    kv,
    logs,
    passkeys,
    payments,
    quota,
    quota_data,
    redemptions,
    tables,
    topups,
    two_factor,
)
from models.base import Base

metadata = Base.metadata

__all__ = ["abilities", "channels", "credits", "deployment", "keys", "kv", "logs", "metadata", "passkeys",
           "payments", "quota", "quota_data", "redemptions", "tables", "topups", "two_factor"]
