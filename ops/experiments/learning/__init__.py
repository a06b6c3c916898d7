"""`slca bench learning`: the estimator comparison (arms: every registered estimator, and slca_decision) from one warm
start, several seeds, an equal budget, resumable; every model evaluated on the same held-out items; paired
verdicts by a rule fixed before the run (`inference`); results.json / results.md / learning.png. `main` is the
plan; each module below does one job (arms, plan and budget arithmetic, one run, evaluation, diagnostics,
statistics, verdict, the files)."""
