"""`slca bench learning`: the estimator comparison (slca vs grpo vs toolpo vs rltr) from one warm start, several
seeds, an equal budget, resumable; results.json / results.md / learning.png with a verdict computed from the
numbers. `main` is the plan; each module below does one job (plan and budget arithmetic, one run, evaluation,
diagnostics, statistics and verdict, the files)."""
