"""ops component."""
