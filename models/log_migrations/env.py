"""Alembic environment of a separate log database (`LOG_DATABASE_URL`): the `logs` table alone, versioned
in its own table `alembic_version_logs`; runs on the connection `models.migrate` hands over."""

from alembic import context

from models.logs import log_metadata
from models.migrate import LOG_VERSION_TABLE

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `tollway migrate` (models.migrate), not the alembic CLI")

context.configure(
    connection=connection,
    target_metadata=log_metadata(),
    version_table=LOG_VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
