"""TOTP two-factor authentication: each user's encrypted secret and replay guard, and the backup codes
(keyed digests).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "two_factor",
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("last_used_step", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("enabled_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", name="pk_two_factor"),
    )
    op.create_table(
        "two_factor_backup_codes",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_two_factor_backup_codes"),
    )
    op.create_index("ix_two_factor_backup_codes_user_id", "two_factor_backup_codes", ["user_id"])


def downgrade() -> None:
    op.drop_table("two_factor_backup_codes")
    op.drop_table("two_factor")
