"""Training and judging runs: `slca train` (`train/`), the evaluation (`eval/`: `slca eval`, also the feed's
held-out probe and the estimator comparison), `slca bench learning` (`learning/`), the warm start (`warmstart/`:
`slca sft`, and the warm-started model `slca up` and the comparison start from), `slca score` (`score`), and the
in-process server the runs drive (`inprocess_server`)."""
