"""System routes: status, initial setup, options."""
