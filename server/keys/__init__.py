"""API keys ("tokens"): the routes, their rules, how a key is shown, and the key directory the gateway
reads on every model call (docs/api/accounts.md#api-keys)."""
