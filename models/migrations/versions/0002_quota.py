"""Quota: logs, API keys (tokens), channels and the quota sync cursor.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
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
        sa.PrimaryKeyConstraint("id", name="pk_logs"),
        sa.UniqueConstraint("ref", name="uq_logs_ref"),
    )
    op.create_index("ix_logs_user_id_created_at", "logs", ["user_id", "created_at"])
    op.create_index("ix_logs_created_at", "logs", ["created_at"])
    for column in ("type", "username", "token_name", "model_name", "channel", "token_id", "request_id"):
        op.create_index(f"ix_logs_{column}", "logs", [column])

    op.create_table(
        "tokens",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("key_digest", sa.String(64), nullable=False),
        sa.Column("key_encrypted", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("created_time", sa.BigInteger(), nullable=False),
        sa.Column("accessed_time", sa.BigInteger(), nullable=False),
        sa.Column("expired_time", sa.BigInteger(), nullable=False),
        sa.Column("remain_quota", sa.BigInteger(), nullable=False),
        sa.Column("used_quota", sa.BigInteger(), nullable=False),
        sa.Column("unlimited_quota", sa.Boolean(), nullable=False),
        sa.Column("model_limits_enabled", sa.Boolean(), nullable=False),
        sa.Column("model_limits", sa.Text(), nullable=False),
        sa.Column("allow_ips", sa.Text(), nullable=False),
        sa.Column("group", sa.String(64), nullable=False),
        sa.Column("deleted_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tokens"),
        sa.UniqueConstraint("key_digest", name="uq_tokens_key_digest"),
    )
    op.create_index("ix_tokens_user_id", "tokens", ["user_id"])
    op.create_index("ix_tokens_deleted_at", "tokens", ["deleted_at"])

    op.create_table(
        "channels",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("type", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("key_encrypted", sa.Text(), nullable=False),
        sa.Column("key_digest", sa.String(64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("models", sa.Text(), nullable=False),
        sa.Column("group", sa.Text(), nullable=False),
        sa.Column("priority", sa.BigInteger(), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("base_url", sa.String(255), nullable=False),
        sa.Column("test_model", sa.String(255), nullable=False),
        sa.Column("openai_organization", sa.String(255), nullable=False),
        sa.Column("other", sa.Text(), nullable=False),
        sa.Column("tag", sa.String(64), nullable=False),
        sa.Column("remark", sa.String(255), nullable=False),
        sa.Column("model_mapping", sa.Text(), nullable=False),
        sa.Column("status_code_mapping", sa.Text(), nullable=False),
        sa.Column("setting", sa.Text(), nullable=False),
        sa.Column("param_override", sa.Text(), nullable=False),
        sa.Column("header_override", sa.Text(), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.Column("auto_ban", sa.Integer(), nullable=False),
        sa.Column("balance", sa.Float(), nullable=False),
        sa.Column("balance_updated_time", sa.BigInteger(), nullable=False),
        sa.Column("used_quota", sa.BigInteger(), nullable=False),
        sa.Column("created_time", sa.BigInteger(), nullable=False),
        sa.Column("test_time", sa.BigInteger(), nullable=False),
        sa.Column("response_time", sa.Integer(), nullable=False),
        sa.Column("other_info", sa.Text(), nullable=False),
        sa.Column("channel_info", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_channels"),
    )
    op.create_index("ix_channels_key_digest", "channels", ["key_digest"])
    op.create_index("ix_channels_tag", "channels", ["tag"])

    cursor = op.create_table(
        "quota_cursor",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("last_id", sa.String(40), nullable=False),
        sa.Column("epoch", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_quota_cursor"),
    )
    op.bulk_insert(cursor, [{"id": 1, "last_id": "0-0", "epoch": "", "updated_at": 0}])


def downgrade() -> None:
    op.drop_table("quota_cursor")
    op.drop_table("channels")
    op.drop_table("tokens")
    op.drop_table("logs")
