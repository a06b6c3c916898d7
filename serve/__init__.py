"""serve component."""
