"""Payment events: each payment-provider event that changed a top-up order, recorded once.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def KeyString(length: int) -> sa.String:
    return sa.String(length).with_variant(mysql.VARCHAR(length, collation="utf8mb4_bin"), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "payment_events",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("provider", KeyString(32), nullable=False),
        sa.Column("event_id", KeyString(128), nullable=False),
        sa.Column("type", sa.String(128), nullable=False),
        sa.Column("trade_no", sa.String(64), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_payment_events"),
        sa.UniqueConstraint("provider", "event_id", name="uq_payment_events_provider"),
    )


def downgrade() -> None:
    op.drop_table("payment_events")
