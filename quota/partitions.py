"""Which partition an account's quota state lives in.

A deployment splits its quota state into a fixed number of partitions (`QUOTA_PARTITIONS`, chosen once:
changing it is a migration, docs/PRODUCTION.md#quota-partitions). Every Redis key of one account — its live
balance and held sum, those of its API keys (a key belongs to its owner's partition), its holds and their
markers, its rate-limit state, the idempotency results of its adjustments — and the partition's own usage
stream, sync cursor, epoch, holds index and copy of the version counters carry the partition as a Redis hash
tag `{p<n>}`. So every quota script touches one hash slot (one node of a Redis Cluster), and each
partition's stream is synced on its own (several sync processes share the partitions).

The partition of a user is its id modulo the count: stable, and even over sequential ids. The hash tag and
the default count are the shared store's (backend/slots.py: the version counters keep a copy per partition
too); this module says which account lives where.
"""

from __future__ import annotations

from backend.slots import DEFAULT_PARTITIONS, tag
from quota.store import SetupRefused
from quota.types import Account

__all__ = ["DEFAULT_PARTITIONS", "MAX_PARTITIONS", "PartitionCountChanged", "owner_of", "partition_of", "tag"]

MAX_PARTITIONS = 256  # the SQL cursor table holds one row per partition up to this many


def partition_of(user_id: int, count: int) -> int:
    """The partition of user `user_id` (and of its API keys) among `count`."""
    return user_id % count


def owner_of(account: Account, account_id: int, owner: int) -> int:
    """The user whose partition an account lives in: a user its own, an API key its `owner`'s (which a
    caller naming a key account must give)."""
    if account == "user":
        return account_id
    if owner <= 0:
        raise ValueError("a key account needs its owner's user id (owner=…: the partition it lives in)")
    return owner


class PartitionCountChanged(SetupRefused):
    """The store holds state for another number of partitions than this process is configured with."""

    def __init__(self, stored: int, configured: int) -> None:
        super().__init__(f"QUOTA_PARTITIONS is {configured}, but the quota store was set up with {stored} "
                         "partitions; changing it is a migration (docs/PRODUCTION.md#quota-partitions)")
        self.stored = stored
        self.configured = configured
