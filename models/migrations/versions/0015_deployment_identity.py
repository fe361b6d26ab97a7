"""The deployment's identity: a random id written once, here, and recorded by the quota store in Redis.

Revision ID: 0015
Revises: 0014

One row (id 1) in `deployments` (models/deployment.py). A process that opens the Redis quota store compares
the store's id with this one and refuses to start when they differ: the quota state under a Redis key
prefix belongs to one database (docs/PRODUCTION.md#deployment-identity). A deployment upgrading gets its
id here; its Redis has none yet and records this one when the first process opens it.
"""

import secrets
import time

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    deployments = op.create_table(
        "deployments",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("uid", sa.String(32), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_deployments"),
    )
    op.bulk_insert(deployments, [{"id": 1, "uid": secrets.token_hex(16), "created_at": int(time.time())}])


def downgrade() -> None:
    op.drop_table("deployments")
