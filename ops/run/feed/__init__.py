"""`slca feed`: training traffic through the agent API, from a task pack."""
