"""Tollway's durable records: SQLAlchemy tables, the async database handle and the queries on them.

Nothing here imports `server/` or Sanic. Each table family has one module holding its mapped class and
its queries (a repository taking an `AsyncSession`).
"""
