"""sim component."""
