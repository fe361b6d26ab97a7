"""Alembic environment and versions; run through `models.migrate`, never by hand-written DDL."""
