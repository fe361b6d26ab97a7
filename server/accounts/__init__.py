"""Users: the admin user routes, the self routes, and the cached view of who a user is right now."""
