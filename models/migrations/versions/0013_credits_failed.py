"""Credits the quota engine refuses for good are settled as failed: `pending_credits` gets a status,
the reason and the time it failed, and an index the replay reads pending rows by.

Revision ID: 0013
Revises: 0012

Every existing row is `pending` (the replay keeps delivering it, as before).
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# should SQLite rebuild the table (a DROP COLUMN does), it keeps AUTOINCREMENT (migration 0012)
NEVER_REUSE_IDS = {"sqlite_autoincrement": True}


def upgrade() -> None:
    with op.batch_alter_table("pending_credits", table_kwargs=NEVER_REUSE_IDS) as batch:
        batch.add_column(sa.Column("status", sa.String(16), nullable=False, server_default="pending"))
        batch.add_column(sa.Column("reason", sa.String(255), nullable=False, server_default=""))
        batch.add_column(sa.Column("failed_at", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_index("ix_pending_credits_status", "pending_credits", ["status", "id"])


def downgrade() -> None:
    op.drop_index("ix_pending_credits_status", table_name="pending_credits")
    with op.batch_alter_table("pending_credits", table_kwargs=NEVER_REUSE_IDS) as batch:
        batch.drop_column("failed_at")
        batch.drop_column("reason")
        batch.drop_column("status")
