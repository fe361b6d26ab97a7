"""Money: redemption codes, top-up orders, and the credits decided in SQL that the quota engine has not
confirmed yet.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def KeyString(length: int) -> sa.String:
    return sa.String(length).with_variant(mysql.VARCHAR(length, collation="utf8mb4_bin"), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "redemptions",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("key", KeyString(32), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(20), nullable=False),
        sa.Column("quota", sa.BigInteger(), nullable=False),
        sa.Column("created_time", sa.BigInteger(), nullable=False),
        sa.Column("redeemed_time", sa.BigInteger(), nullable=False),
        sa.Column("expired_time", sa.BigInteger(), nullable=False),
        sa.Column("used_user_id", sa.BigInteger(), nullable=False),
        sa.Column("deleted_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_redemptions"),
        sa.UniqueConstraint("key", name="uq_redemptions_key"),
    )
    op.create_index("ix_redemptions_deleted_at", "redemptions", ["deleted_at"])

    op.create_table(
        "top_ups",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("money", sa.Double(), nullable=False),
        sa.Column("trade_no", KeyString(58), nullable=False),
        sa.Column("payment_method", sa.String(32), nullable=False),
        sa.Column("payment_provider", sa.String(32), nullable=False),
        sa.Column("create_time", sa.BigInteger(), nullable=False),
        sa.Column("complete_time", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_top_ups"),
        sa.UniqueConstraint("trade_no", name="uq_top_ups_trade_no"),
    )
    op.create_index("ix_top_ups_user_id", "top_ups", ["user_id"])

    op.create_table(
        "pending_credits",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("ref", KeyString(64), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_pending_credits"),
        sa.UniqueConstraint("ref", name="uq_pending_credits_ref"),
    )


def downgrade() -> None:
    op.drop_table("pending_credits")
    op.drop_table("top_ups")
    op.drop_table("redemptions")
