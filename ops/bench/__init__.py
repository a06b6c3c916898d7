"""Side-by-side benchmarks that compose components (serve + workers + learner): `slca bench queue | rl`."""
