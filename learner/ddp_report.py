"""One optimizer step's figures summed over the ranks that took it, so that every rank's `StepReport` describes
the whole step (all its groups) whatever the number of ranks: the loss and every figure are sums over micro-batches
(`LossSums`, `EstimatorStats`), so the ranks' shares add up to what one process would report on all the groups."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from learner.ddp_comm import gather_json
from learner.step_stats import ChannelStats, EstimatorStats, GroupCounts, LossSums, TokenFigures
from slca.contracts import SegmentKind


@dataclass(frozen=True)
class StepShare:
    """What one rank (or, summed, the ranks together) trained in a step."""

    loss: float = 0.0
    """Its part of the step's loss (each micro-batch's loss is already divided by the step's totals)."""
    row_tokens: int = 0
    skipped_zero: int = 0
    constrained_excluded: int = 0
    group_ids: list[str] = field(default_factory=list)
    sums: LossSums | None = None
    estimator: EstimatorStats = field(default_factory=EstimatorStats)
    groups: GroupCounts = field(default_factory=GroupCounts)

    def __add__(self, other: StepShare) -> StepShare:
        if self.sums is None or other.sums is None:
            sums = self.sums or other.sums
        else:
            sums = self.sums.merge(other.sums)
        return StepShare(
            self.loss + other.loss,
            self.row_tokens + other.row_tokens,
            self.skipped_zero + other.skipped_zero,
            self.constrained_excluded + other.constrained_excluded,
            self.group_ids + other.group_ids,
            sums,
            self.estimator + other.estimator,
            self.groups + other.groups,
        )

    def to_json(self) -> dict:
        return {
            "loss": self.loss,
            "row_tokens": self.row_tokens,
            "skipped_zero": self.skipped_zero,
            "constrained_excluded": self.constrained_excluded,
            "group_ids": self.group_ids,
            "sums": None if self.sums is None else _sums_json(self.sums),
            "estimator": {name: asdict(c) for name, c in self.estimator.channels.items()},
            "groups": asdict(self.groups),
        }

    @classmethod
    def from_json(cls, data: dict) -> StepShare:
        return cls(
            loss=data["loss"],
            row_tokens=data["row_tokens"],
            skipped_zero=data["skipped_zero"],
            constrained_excluded=data["constrained_excluded"],
            group_ids=data["group_ids"],
            sums=None if data["sums"] is None else _sums_of(data["sums"]),
            estimator=EstimatorStats({name: ChannelStats(**c) for name, c in data["estimator"].items()}),
            groups=GroupCounts(**data["groups"]),
        )


def gather_step(mine: StepShare, device) -> StepShare:
    """The ranks' shares of one step, summed in rank order (the step's group ids in the order rank 0 handed them
    out), on every rank: one collective."""
    shares = [StepShare.from_json(s) for s in gather_json(mine.to_json(), device)]
    total = shares[0]
    for share in shares[1:]:
        total = total + share
    return total


def _sums_json(sums: LossSums) -> dict:
    return {
        "all": asdict(sums.all),
        "by_kind": {kind.value: asdict(f) for kind, f in sums.by_kind.items()},
        "ratio_max": sums.ratio_max,
        "ratio_min": sums.ratio_min,
    }


def _sums_of(data: dict) -> LossSums:
    return LossSums(
        TokenFigures(**data["all"]),
        {SegmentKind(kind): TokenFigures(**f) for kind, f in data["by_kind"].items()},
        data["ratio_max"],
        data["ratio_min"],
    )
