"""Reading what the running system does: Redis reads (`redis_view`), Prometheus scrapes (`scrape`), the held-out
probe's round record (`probe_rounds`), memory and CPU of process trees from /proc (`procs`), the reward curve and
probe report (`reward_curve`, `probe_report`) that `slca status` and `slca bench online` (`online`) print and write,
the dashboard, Grafana and Prometheus files."""
