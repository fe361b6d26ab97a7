"""Username keys: from the case-folded name to the case-folded NFKC form (`ａｌｉｃｅ` is `alice`).

Revision ID: 0004
Revises: 0003

Recomputes `users.username_key` for every row. Should two existing accounts now share a key (e.g. `alice`
and `ａｌｉｃｅ`, registered before names were normalised), the older one gets it and the newer one keeps its
old key, so the unique index holds; an admin should rename that account (it is logged at warning level).
Rows are moved through a temporary key first so that no intermediate state breaks the unique index.
The function is copied here on purpose: a migration must mean the same thing forever.
"""

import logging
import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")
users = sa.table("users", sa.column("id", sa.BigInteger()), sa.column("username", sa.String(64)),
                 sa.column("username_key", sa.String(64)))


def _key(username: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", username).casefold())


def _rekey(compute) -> None:  # type: ignore[no-untyped-def]
    conn = op.get_bind()
    rows = conn.execute(sa.select(users.c.id, users.c.username, users.c.username_key).order_by(users.c.id)).all()
    changing = [(r.id, r.username_key, compute(r.username)) for r in rows if compute(r.username) != r.username_key]
    if not changing:
        return
    taken = {r.username_key for r in rows} - {old for _, old, _ in changing}
    final: dict[int, str] = {}
    for user_id, old, new in changing:
        choice = new if new not in taken else old
        if choice in taken:
            choice = f"{old[:40]}#{user_id}"
        if choice != new:
            log.warning("users.id=%s keeps its previous username key: another account has the new one; "
                        "rename it", user_id)
        taken.add(choice)
        final[user_id] = choice
    for user_id in final:
        conn.execute(sa.update(users).where(users.c.id == user_id).values(username_key=f"~rekey~{user_id}"))
    for user_id, key in final.items():
        conn.execute(sa.update(users).where(users.c.id == user_id).values(username_key=key))


def upgrade() -> None:
    _rekey(_key)


def downgrade() -> None:
    _rekey(lambda username: username.casefold())
