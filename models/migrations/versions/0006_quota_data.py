"""Usage data: hourly buckets per (user, model), fed by the quota sync with the consume logs.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def KeyString(length: int) -> sa.String:
    return sa.String(length).with_variant(mysql.VARCHAR(length, collation="utf8mb4_bin"), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "quota_data",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("model_name", KeyString(255), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("token_used", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("quota", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_quota_data"),
    )
    op.create_index("uq_quota_data_bucket", "quota_data", ["user_id", "model_name", "created_at"], unique=True)
    op.create_index("ix_quota_data_created_at", "quota_data", ["created_at"])
    op.create_index("ix_quota_data_username", "quota_data", ["username"])


def downgrade() -> None:
    op.drop_table("quota_data")
