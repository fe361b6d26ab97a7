"""Alembic environment: runs on the connection `models.migrate` hands over (sync, via run_sync)."""

from alembic import context

from models.base import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `tollway migrate` (models.migrate), not the alembic CLI")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
