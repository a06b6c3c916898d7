"""What a probe round asks (the feed's held-out probe, `ops/run/feed/probe.py`, and the last served version judged
pinned, `ops/observe/final_round.py`): one evaluation plan read from `[ops]`. Here, with the evaluation it plans,
so that both rooms import it from below."""

from __future__ import annotations

from ops.experiments.eval.records import EvalPlan
from ops.settings import OpsSettings


def probe_eval_plan(ops: OpsSettings) -> EvalPlan:
    """`slca eval`'s plan (same turn and token budgets) on the feed's pack, with the probe's splits, training-task
    probe size, BFCL sample, mode and requests in flight."""
    per_category = ops.probe_bfcl_per_category
    bfcl = {"bfcl_per_category": per_category} if per_category else {"bfcl_categories": ()}
    return EvalPlan(
        splits=tuple(ops.probe_splits),
        pack=ops.feed_pack,
        train_probe_size=ops.probe_train_size,
        mode=ops.probe_mode,
        concurrency=ops.probe_concurrency,
        **bfcl,
    )
