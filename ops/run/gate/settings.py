"""Settings of the promotion gate (`[ops]` section: `OpsSettings` inherits them)."""

from pydantic import Field

from slca.config import SectionSettings


class GateSettings(SectionSettings):
    """When and on what the gate judges a candidate, and its rule (ops/run/gate/)."""

    gate_enabled: bool = True
    """Run the gate in `slca up` (process `gate`). Off: callers keep the promoted version until `slca promote`,
    unless `serve.follow_candidate` is on."""
    gate_every_versions: int = Field(default=40, ge=1)
    """Judge the candidate once it is this many versions past the last one judged ..."""
    gate_every_minutes: float = Field(default=30.0, gt=0)
    """... or this many minutes after the last decision, whichever comes first (a candidate newer than the promoted
    version and than the last one judged)."""
    gate_items: int = Field(default=96, ge=8)
    """Gate-set tasks per decision (`sim.tasks.gate`: disjoint from train, test and novel). 96 greedy agent runs
    take ≈ 3 min on 2 cores (0.52 items/s): two decisions an hour are ≈ 10% of a run's time."""
    gate_margin: float = Field(default=0.05, ge=0.0, le=1.0)
    """Non-inferiority margin: promote only when the lower bound of the paired 95% interval of candidate − promoted
    success is above −margin."""
    gate_require_better: bool = False
    """Also require the difference itself to be above 0."""
    gate_concurrency: int = Field(default=16, ge=1)
    """Gate requests in flight (the engine batches them)."""
    gate_poll_s: float = Field(default=15.0, gt=0)
    """Seconds between the gate's looks at serve's versions."""
    success_rollback_window: int = Field(default=200, ge=1)
    """Scored-success guard (ops/run/gate/success_guard.py): the latest scored trajectories of a version it compares
    (the promoted version's and the previous promoted version's, from `stats:rewards`). Wide enough for a bound of
    ≈ ±0.1 at success near 0.5, short enough to reflect the version's traffic of the last minutes to hours."""
    success_rollback_min: int = Field(default=100, ge=1)
    """Scored-success guard: scored trajectories each of the two versions needs before it is judged. Below it a
    window is a handful of tasks whose mix alone moves success by tenths (the runs this issue began from saw whole
    versions at 0.04–0.15 on 3–7 trajectories): the guard waits rather than roll back on them."""
    success_rollback_margin: float = Field(default=0.1, ge=0.0, le=1.0)
    """Scored-success guard: roll the promoted version back when the one-sided 95% upper bound (Newcombe's score
    interval) of its success minus the previous promoted version's is below −margin. Wider than `gate_margin`: the
    two windows are not paired and may come from different times and task mixes (the feed's while a version was the
    candidate, callers' since). 1.0: never roll back on success."""
