"""The quota state in partitions: one sync cursor row per partition (quota/partitions.py).

Revision ID: 0014
Revises: 0013

A row for every partition a deployment may have (0 .. 255: `QUOTA_PARTITIONS` is at most 256), each at the
start of its stream ("0-0", no epoch yet). `quota_cursor` stays: it is the cursor of the single stream of
the layout before partitions, which the sync drains once after an upgrade
(docs/PRODUCTION.md#upgrading-to-quota-partitions).
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

PARTITION_ROWS = 256  # quota/partitions.py MAX_PARTITIONS (a migration never imports the running code)


def upgrade() -> None:
    cursors = op.create_table(
        "quota_cursors",
        sa.Column("partition", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("last_id", sa.String(40), nullable=False),
        sa.Column("epoch", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("partition", name="pk_quota_cursors"),
    )
    op.bulk_insert(cursors, [{"partition": p, "last_id": "0-0", "epoch": "", "updated_at": 0}
                             for p in range(PARTITION_ROWS)])


def downgrade() -> None:
    op.drop_table("quota_cursors")
