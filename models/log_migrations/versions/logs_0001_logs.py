"""A separate log database: the `logs` table, as the main database has it at revision 0007.

Revision ID: logs_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "logs_0001"
down_revision = None
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "logs",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("token_name", sa.String(64), nullable=False),
        sa.Column("model_name", sa.String(255), nullable=False),
        sa.Column("quota", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("use_time", sa.Integer(), nullable=False),
        sa.Column("is_stream", sa.Boolean(), nullable=False),
        sa.Column("channel", sa.BigInteger(), nullable=False),
        sa.Column("token_id", sa.BigInteger(), nullable=False),
        sa.Column("group", sa.String(64), nullable=False),
        sa.Column("ip", sa.String(64), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=False),
        sa.Column("other", sa.Text(), nullable=False),
        sa.Column("ref", sa.String(64), nullable=True),
        sa.Column("entry_id", sa.String(40), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_logs"),
        sa.UniqueConstraint("ref", name="uq_logs_ref"),
    )
    op.create_index("ix_logs_user_id_created_at", "logs", ["user_id", "created_at"])
    op.create_index("ix_logs_created_at", "logs", ["created_at"])
    for column in ("type", "username", "token_name", "model_name", "channel", "token_id", "request_id"):
        op.create_index(f"ix_logs_{column}", "logs", [column])


def downgrade() -> None:
    op.drop_table("logs")
