"""`slca bench swap`: hot swaps under load. `main` publishes versions while clients send requests, `report` turns
the timings into latencies, failures and the mixed-version share."""
