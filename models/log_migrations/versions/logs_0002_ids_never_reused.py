"""A log id is never given twice: on SQLite, the `logs` table is rebuilt with AUTOINCREMENT (as the main
database's revision 0012 does).

Revision ID: logs_0002
Revises: logs_0001

Without AUTOINCREMENT, SQLite gives a new row max(id) + 1, so once the newest logs are deleted their ids
are given again. The table is rebuilt by Alembic's batch mode (every row and index kept) and its counter
(`sqlite_sequence`) starts above the highest id it holds. MariaDB and PostgreSQL never give an id twice
already: nothing changes there.
"""

from alembic import op

revision = "logs_0002"
down_revision = "logs_0001"
branch_labels = None
depends_on = None


def _rebuild(*, autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    options = {"sqlite_autoincrement": autoincrement}
    with op.batch_alter_table("logs", recreate="always", table_kwargs=options):
        pass


def upgrade() -> None:
    # the copy sets the counter to the highest id copied; the table had no counter before
    _rebuild(autoincrement=True)


def downgrade() -> None:
    _rebuild(autoincrement=False)
