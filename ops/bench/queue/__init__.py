"""`slca bench queue`: the stream producer and the worker side against redis-benchmark. `main` is the plan,
`producer` serve's recorder side, `workers` the scoring side."""
