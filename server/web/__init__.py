"""HTTP conventions shared by every `/api` route: envelope, JSON bodies, pagination, access levels,
request ids, client IPs and per-IP rate limits."""
