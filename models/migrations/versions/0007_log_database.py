"""Logs in a separate database: the stream entry a log row came from, and the outbox of service logs.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("logs") as batch:
        batch.add_column(sa.Column("entry_id", sa.String(40), nullable=True))
    op.create_table(
        "log_outbox",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("ref", sa.String(64), nullable=False),
        sa.Column("row", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_log_outbox"),
        sa.UniqueConstraint("ref", name="uq_log_outbox_ref"),
    )


def downgrade() -> None:
    op.drop_table("log_outbox")
    with op.batch_alter_table("logs") as batch:
        batch.drop_column("entry_id")
