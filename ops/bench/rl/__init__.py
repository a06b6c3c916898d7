"""`slca bench rl`: TRL's GRPOTrainer against slca's online pipeline, alternated windows. `main` is the plan,
`trl_side` TRL's side (run as its own process: `python -m ops.bench.rl.trl_side`), `slca_side` the pipeline's,
`report` the figures and the verdict. `trl_marks`: TRL's model saved at marks on a wall clock, for `slca bench
learn-vs-trl` (`ops/bench/learn_vs_trl/`)."""
