"""Ids are never given twice: on SQLite, every table with a generated id is rebuilt with AUTOINCREMENT.

Revision ID: 0012
Revises: 0011

Without AUTOINCREMENT, SQLite gives a new row max(id) + 1: once the row with the highest id is deleted,
the next row gets that id back, and with it everything that still names it (a deleted channel's logs
showed under the next channel). Each table is rebuilt by Alembic's batch mode — a new table with every
row, index and unique constraint, the old one dropped — and its counter (`sqlite_sequence`) is set to the
highest id it holds or that another table still names (a channel deleted before the upgrade keeps its
number in `logs.channel` and `abilities`; a user in every `user_id`; a redemption code in the `redeem:<id>`
refs of its credit), so that none of them is given again.

MariaDB (InnoDB's AUTO_INCREMENT, kept across restarts since 10.2.4) and PostgreSQL (sequences) never give
an id twice already: nothing changes there.
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _highest(table: str, column: str) -> sa.Select[int]:
    return sa.select(sa.func.max(sa.column(column, sa.BigInteger))).select_from(sa.table(table))


def _highest_redeemed(table: str) -> sa.Select[int]:
    """The highest code id in the `redeem:<code id>` refs (the idempotency key of a code's credit)."""
    ref = sa.column("ref", sa.String)
    code_id = sa.cast(sa.func.substr(ref, len("redeem:") + 1), sa.BigInteger)
    return sa.select(sa.func.max(code_id)).select_from(sa.table(table)).where(ref.like("redeem:%"))


# every table with a generated id, and the ids other tables still hold for it
NAMED_ELSEWHERE: dict[str, list[sa.Select[int]]] = {
    "users": [_highest(table, column) for table, column in (
        ("logs", "user_id"), ("tokens", "user_id"), ("top_ups", "user_id"), ("redemptions", "user_id"),
        ("redemptions", "used_user_id"), ("passkey_credentials", "user_id"), ("two_factor", "user_id"),
        ("two_factor_backup_codes", "user_id"), ("quota_data", "user_id"), ("pending_credits", "user_id"),
        ("sessions", "user_id"), ("users", "inviter_id"))],
    "channels": [_highest("logs", "channel"), _highest("abilities", "channel_id")],
    "tokens": [_highest("logs", "token_id")],
    "redemptions": [_highest_redeemed("logs"), _highest_redeemed("pending_credits")],
    "top_ups": [],
    "passkey_credentials": [],
    "logs": [],
    "log_outbox": [],
    "pending_credits": [],
    "payment_events": [],
    "quota_data": [],
    "two_factor_backup_codes": [],
}


def _counter(conn: sa.Connection, table: str) -> int:
    """The table's `sqlite_sequence` value (0 when it has none)."""
    if conn.scalar(sa.text("SELECT COUNT(*) FROM sqlite_master WHERE name = 'sqlite_sequence'")) == 0:
        return 0
    return int(conn.scalar(sa.text("SELECT seq FROM sqlite_sequence WHERE name = :t"), {"t": table}) or 0)


def _rebuild(table: str, *, autoincrement: bool, named_elsewhere: list[sa.Select[int]]) -> None:
    conn = op.get_bind()
    high = max([_counter(conn, table)] + [int(conn.scalar(query) or 0) for query in named_elsewhere])
    options = {"sqlite_autoincrement": autoincrement}
    with op.batch_alter_table(table, recreate="always", table_kwargs=options):
        pass
    if autoincrement:  # the copy set the counter to the highest id copied; never lower than `high`
        conn.execute(sa.text("UPDATE sqlite_sequence SET seq = :high WHERE name = :t AND seq < :high"),
                     {"t": table, "high": high})
        if high > 0 and _counter(conn, table) == 0:
            conn.execute(sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :high)"),
                         {"t": table, "high": high})


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table, queries in NAMED_ELSEWHERE.items():
        _rebuild(table, autoincrement=True, named_elsewhere=queries)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in NAMED_ELSEWHERE:
        _rebuild(table, autoincrement=False, named_elsewhere=[])
