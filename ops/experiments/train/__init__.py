"""`slca train`: the controlled synchronous run — generate, score, update, publish (`controlled`; the command in
`cli`)."""
