"""Who is calling: sessions, login, access tokens, passwords and the per-route access guard."""
