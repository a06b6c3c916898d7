"""workers component."""
