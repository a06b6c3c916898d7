"""Evaluation: the held-out task splits and BFCL through a running slca server, one path for `slca eval`, the
online probe and the estimator comparison (`ops.experiments.eval.suite`)."""
