"""Foundation: users, options, setups, sessions.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def KeyString(length: int) -> sa.String:
    return sa.String(length).with_variant(mysql.VARCHAR(length, collation="utf8mb4_bin"), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("username_key", KeyString(64), nullable=False),
        sa.Column("email_key", KeyString(128), nullable=True),
        sa.Column("password", sa.String(255), nullable=False),
        sa.Column("display_name", sa.String(64), nullable=False),
        sa.Column("email", sa.String(128), nullable=False),
        sa.Column("role", sa.Integer(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("group", sa.String(64), nullable=False),
        sa.Column("quota", sa.BigInteger(), nullable=False),
        sa.Column("used_quota", sa.BigInteger(), nullable=False),
        sa.Column("request_count", sa.BigInteger(), nullable=False),
        sa.Column("aff_code", sa.String(32), nullable=True),
        sa.Column("aff_count", sa.BigInteger(), nullable=False),
        sa.Column("aff_quota", sa.BigInteger(), nullable=False),
        sa.Column("aff_history_quota", sa.BigInteger(), nullable=False),
        sa.Column("inviter_id", sa.BigInteger(), nullable=False),
        sa.Column("setting", sa.Text(), nullable=False),
        sa.Column("remark", sa.String(255), nullable=False),
        sa.Column("stripe_customer", sa.String(128), nullable=False),
        sa.Column("access_token", sa.String(64), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("last_login_at", sa.BigInteger(), nullable=False),
        sa.Column("deleted_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("username_key", name="uq_users_username_key"),
        sa.UniqueConstraint("email_key", name="uq_users_email_key"),
        sa.UniqueConstraint("aff_code", name="uq_users_aff_code"),
        sa.UniqueConstraint("access_token", name="uq_users_access_token"),
    )
    op.create_index("ix_users_deleted_at", "users", ["deleted_at"])

    op.create_table(
        "options",
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_options"),
    )
    op.create_table(
        "setups",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("initialized_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_setups"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
    )
    op.create_index("ix_sessions_user_id", "sessions", ["user_id"])
    op.create_index("ix_sessions_expires_at", "sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_table("sessions")
    op.drop_table("setups")
    op.drop_table("options")
    op.drop_table("users")
