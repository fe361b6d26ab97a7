"""The partitions of the shared store, as Redis hash tags.

A deployment splits its state in Redis into a fixed number of partitions (`QUOTA_PARTITIONS`; which account
lives in which is the quota engine's business, quota/partitions.py). Every key of one partition carries the
partition's hash tag `{p<n>}`, so that an atomic step over one partition's keys touches one hash slot (one
node of a Redis Cluster): the version counters keep a copy in each partition (backend/versions.py), and the
rate limits of a user carry its partition's tag, to be charged in the same step as its reservation.
"""

DEFAULT_PARTITIONS = 16


def tag(partition: int) -> str:
    """The Redis hash tag of a partition: every key with it hashes to the same slot."""
    return f"{{p{partition}}}"
