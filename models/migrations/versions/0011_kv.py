"""Short-lived keys without Redis: the `kv` table (models/kv.py).

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def KeyString(length: int) -> sa.String:
    return sa.String(length).with_variant(mysql.VARCHAR(length, collation="utf8mb4_bin"), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "kv",
        sa.Column("key", KeyString(191), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_kv"),
    )
    op.create_index("ix_kv_expires_at", "kv", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_kv_expires_at", table_name="kv")
    op.drop_table("kv")
