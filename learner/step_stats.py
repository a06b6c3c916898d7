"""The learner's step figures, typed end to end (docs/design.md#metrics): what a loss sums over a micro-batch, what
an estimator reports per channel, and what one optimizer step reports.

    loss fn ─▶ LossSums (per micro-batch) ─merge─▶ LossSums (the step) ─means()─▶ LossStats ┐
    estimator ─▶ EstimatorStats (per group) ─────────────────────────────merge─▶ (the step) ├─▶ StepStats
                                                                                           ┘
`StepStats` is what `learner.trainer.StepReport` carries; it leaves the learner three ways, each converted once:

- `learner.loop.step_stats` → the `slca.contracts.stats.LearnerStepStats` row of `stats:learner` (its one writer);
- `learner.metrics.LearnerMetrics.observe_step` → the Prometheus families (names unchanged);
- `StepStats.to_log()` → the flat per-step JSON line of `metrics.jsonl` (`slca learn`) and `slca train`, whose keys
  (`all/kl`, `tool_call/adv_abs_mean`, `estimator/zero_variance/exec`, …) are a file format: committed runs
  (`bench/learning/`) use it; `StepStats.from_log()` is its one reader (`ops.experiments.learning.diagnostics`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from slca.contracts import SegmentKind

TRAINED_KINDS: tuple[SegmentKind, ...] = (SegmentKind.TOOL_CALL, SegmentKind.SUMMARY, SegmentKind.REASONING)
"""The generated segment kinds, in the order the figures list them (per-kind metrics, the Prometheus label)."""
ALL = "all"
"""The log key of the figures over every trained token (the per-kind ones use `SegmentKind.value`)."""
MIN_PRESENT = 2
"""Fewest members present in an estimator channel for it to be normalised (fewer: advantage 0, never the raw score;
`learner.advantages.common.group_norm`); a reader counts a channel's zero variance only where this many were present
(`ops.experiments.learning.diagnostics`)."""
ESTIMATOR_PREFIX = "estimator/"
"""Log keys of the estimator's channels: `estimator/<figure>/<channel>`."""


@dataclass(frozen=True)
class TokenFigures:
    """Figures over a set of trained tokens (one segment kind, or all): sums over one or more micro-batches, as a loss
    reports them (`LossSums`; `+` merges two), or per-token means of a step (`LossStats`, from `means()`)."""

    tokens: int
    """Trained tokens (in the means too: the count they divide by)."""
    adv: float
    adv_abs: float
    clip: float
    """Tokens whose clipped (or truncated) branch was taken; as a mean, the clip fraction."""
    ratio: float
    logprob_gap: float
    """|behaviour logprob − recomputed logprob|."""
    entropy: float | None = None
    """Entropy of π_θ at the token (from the logits of the loss's own forward)."""
    kl: float | None = None
    """k3 KL to the reference (None: no reference model)."""
    adv_sq: float | None = None
    """Squared advantage, for the advantages' spread (`adv_std`; None in lines written before it)."""

    def __add__(self, other: TokenFigures) -> TokenFigures:
        def add(a, b):
            return b if a is None else a if b is None else a + b

        return TokenFigures(**{f.name: add(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)})

    def means(self) -> TokenFigures:
        def mean(v: float | None) -> float | None:
            return None if v is None else (v / self.tokens if self.tokens else 0.0)

        return TokenFigures(self.tokens, **{f: mean(getattr(self, f)) for f in LOG_NAMES if f != "tokens"})


LOG_NAMES = {
    "tokens": "tokens",
    "adv": "adv_mean",
    "adv_abs": "adv_abs_mean",
    "clip": "clip_frac",
    "ratio": "ratio_mean",
    "logprob_gap": "logprob_gap_mean",
    "entropy": "entropy_mean",
    "kl": "kl",
    "adv_sq": "adv_sq_mean",
}
"""`TokenFigures` field → the last part of its key in the per-step line, where it is a per-token mean."""
ADV_STD = "adv_std"
"""The last part of the key of the advantages' standard deviation over the tokens (derived from `adv_sq` and `adv`;
`from_log` does not read it)."""


def adv_std(means: TokenFigures) -> float | None:
    """Population standard deviation of the advantages of the tokens `means` describes; None without `adv_sq`."""
    if means.adv_sq is None:
        return None
    return math.sqrt(max(means.adv_sq - means.adv**2, 0.0))


def _merge_kinds(a: dict[SegmentKind, Any], b: dict[SegmentKind, Any]) -> dict[SegmentKind, Any]:
    return {k: a[k] + b[k] if k in a and k in b else a.get(k, b.get(k)) for k in TRAINED_KINDS if k in a or k in b}


@dataclass(frozen=True)
class LossFigures:
    """The loss figures of a micro-batch or a step, over all its trained tokens and per segment kind: sums
    (`LossSums`: what a policy loss reports for one packed group; the trainer merges a step's) or their means
    (`LossStats`)."""

    all: TokenFigures
    by_kind: dict[SegmentKind, TokenFigures]
    """Only the kinds with trained tokens."""
    ratio_max: float
    ratio_min: float

    def merge(self, other: LossSums) -> LossSums:
        return LossFigures(
            self.all + other.all,
            _merge_kinds(self.by_kind, other.by_kind),
            max(self.ratio_max, other.ratio_max),
            min(self.ratio_min, other.ratio_min),
        )

    def means(self) -> LossStats:
        return LossFigures(
            self.all.means(), {k: v.means() for k, v in self.by_kind.items()}, self.ratio_max, self.ratio_min
        )


LossSums = LossFigures
"""A loss's figures as sums (of a micro-batch, or merged over a step's)."""
LossStats = LossFigures
"""A step's loss figures as per-token means (`LossSums.means()`)."""


@dataclass(frozen=True)
class ChannelStats:
    """One channel of an advantage estimator (`exec`, `pref`, `scalar`, …) over one group, or summed over a step's."""

    zero_variance: float
    """Groups whose present rewards in the channel were all equal (it teaches them nothing); for a turn-level channel
    (`exec_turn`), turns."""
    present: float | None = None
    """Members in which the channel's segment is present (None: the channel does not count them)."""

    def __add__(self, other: ChannelStats) -> ChannelStats:
        present = None if self.present is None and other.present is None else (self.present or 0) + (other.present or 0)
        return ChannelStats(self.zero_variance + other.zero_variance, present)


@dataclass(frozen=True)
class EstimatorStats:
    """What an advantage estimator reports: its channels by name (declared with `register_estimator`)."""

    channels: dict[str, ChannelStats] = field(default_factory=dict)

    def __add__(self, other: EstimatorStats) -> EstimatorStats:
        a, b = self.channels, other.channels
        return EstimatorStats({c: a[c] + b[c] if c in a and c in b else a.get(c, b.get(c)) for c in {**a, **b}})


FIGURES = ("zero_variance", "present")
"""The `ChannelStats` figures, in log-key order."""
ZERO_VARIANCE_SHARE = "zero_variance_share"
"""`estimator/zero_variance_share/<channel>`: zero-variance groups over the groups the estimator saw (for a turn-level
channel, `exec_turn`, turns over groups); derived, `from_log` does not read it."""


@dataclass(frozen=True)
class GroupCounts:
    """What became of a step's groups (summed over the ranks under DDP), and their members' task success."""

    given: int = 0
    """Groups handed to the step."""
    screened: int = 0
    """Groups left out by difficulty screening (`learner.screen_success_variance`): every member had the same
    success, so no advantages, no forward, no backward."""
    trained: int = 0
    """Groups that ran a forward and a backward (the others were screened, had only zero advantages
    (`learner.skip_zero_advantage_groups`) or no trainable token)."""
    trajectories: int = 0
    """Trajectories of the trained groups."""
    success_sum: float = 0.0
    """Sum of the success (reward component 'success') of the members of every given group that carry one."""
    success_members: int = 0
    """Members of the given groups whose reward carries a 'success' component."""

    def __add__(self, other: GroupCounts) -> GroupCounts:
        return GroupCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    @property
    def estimated(self) -> int:
        """Groups whose advantages were estimated (the given ones less the screened)."""
        return self.given - self.screened

    @property
    def success_mean(self) -> float | None:
        """Mean success of the members that carry one; None when none does."""
        return self.success_sum / self.success_members if self.success_members else None

    def to_log(self) -> dict[str, float]:
        """`groups_in`, `groups_screened`, `groups_trained`, `trajectories_trained`, `success_members` and, where a
        member carried one, `success_mean`."""
        out = {
            "groups_in": float(self.given),
            "groups_screened": float(self.screened),
            "groups_trained": float(self.trained),
            "trajectories_trained": float(self.trajectories),
            "success_members": float(self.success_members),
        }
        if (mean := self.success_mean) is not None:
            out["success_mean"] = mean
        return out

    @classmethod
    def from_log(cls, line: dict[str, Any]) -> GroupCounts:
        members = int(line.get("success_members", 0))
        return cls(
            given=int(line.get("groups_in", 0)),
            screened=int(line.get("groups_screened", 0)),
            trained=int(line.get("groups_trained", 0)),
            trajectories=int(line.get("trajectories_trained", 0)),
            success_sum=float(line.get("success_mean", 0.0)) * members,
            success_members=members,
        )


@dataclass(frozen=True)
class StepStats:
    """The figures of one optimizer step (`StepReport.stats`)."""

    loss: LossStats | None
    """None when no group was trained (all skipped: their advantages were all zero)."""
    estimator: EstimatorStats
    grad_norm: float = 0.0
    """Total gradient norm before clipping (0: no gradient, nothing trained)."""
    constrained_excluded: int = 0
    """Generated tokens left out because their turn was sampled under a grammar (`learner.step`)."""
    groups: GroupCounts = field(default_factory=GroupCounts)
    """What became of the step's groups, and their success."""
    lr: float | None = None
    """The optimizer's learning rate at the step."""

    @property
    def kl(self) -> float:
        """Mean k3 KL over the step's tokens; 0 without a reference or a trained token."""
        return (self.loss.all.kl or 0.0) if self.loss else 0.0

    @property
    def clip_frac(self) -> float:
        return self.loss.all.clip if self.loss else 0.0

    def adv_abs_mean(self, kind: SegmentKind) -> float | None:
        """Mean |advantage| on the step's tokens of `kind`; None when it trained none."""
        means = self.loss.by_kind.get(kind) if self.loss else None
        return means.adv_abs if means else None

    @property
    def tokens_trained(self) -> int:
        """Generated tokens in the step's loss."""
        return self.loss.all.tokens if self.loss else 0

    def to_log(self) -> dict[str, float]:
        """The flat per-step line (`all/<figure>`, `<kind>/<figure>` with `adv_std`, `all/ratio_max|min`, `grad_norm`,
        `tokens/constrained_excluded`, `tokens_trained`, `estimator/<figure>/<channel>` with
        `zero_variance_share`, the `GroupCounts`, `lr`); figures that are None are left out."""
        out: dict[str, float] = {}
        if self.loss is not None:
            out.update(self._loss_log(self.loss))
        out["grad_norm"] = self.grad_norm
        out["tokens/constrained_excluded"] = float(self.constrained_excluded)
        out["tokens_trained"] = float(self.tokens_trained)
        out.update(self._estimator_log())
        out.update(self.groups.to_log())
        if self.lr is not None:
            out["lr"] = self.lr
        return out

    @staticmethod
    def _loss_log(loss: LossStats) -> dict[str, float]:
        out: dict[str, float] = {}
        sets = [(ALL, loss.all), *((k.value, loss.by_kind[k]) for k in TRAINED_KINDS if k in loss.by_kind)]
        for name, means in sets:
            for field_name, key in LOG_NAMES.items():
                if (value := getattr(means, field_name)) is not None:
                    out[f"{name}/{key}"] = float(value)
            if (std := adv_std(means)) is not None:
                out[f"{name}/{ADV_STD}"] = std
        out[f"{ALL}/ratio_max"] = loss.ratio_max
        out[f"{ALL}/ratio_min"] = loss.ratio_min
        return out

    def _estimator_log(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for channel, stats in self.estimator.channels.items():
            for figure in FIGURES:
                value = getattr(stats, figure)
                if value is not None:
                    out[f"{ESTIMATOR_PREFIX}{figure}/{channel}"] = float(value)
            if self.groups.estimated > 0:
                share = stats.zero_variance / self.groups.estimated
                out[f"{ESTIMATOR_PREFIX}{ZERO_VARIANCE_SHARE}/{channel}"] = share
        return out

    @classmethod
    def from_log(cls, line: dict[str, Any]) -> StepStats:
        """The figures of a per-step line as `to_log()` writes it (other keys of the line are ignored; figures a
        line lacks are None, a kind's `tokens` 0; a line without `all/tokens` trained no token: `loss` None)."""

        def means(name: str) -> TokenFigures | None:
            values = {f: line.get(f"{name}/{key}") for f, key in LOG_NAMES.items()}
            if all(v is None for v in values.values()):
                return None
            return TokenFigures(**{**values, "tokens": int(values["tokens"] or 0)})

        loss = None
        if f"{ALL}/tokens" in line and (all_means := means(ALL)) is not None:
            by_kind = {k: m for k in TRAINED_KINDS if (m := means(k.value)) is not None}
            ratio = (line.get(f"{ALL}/ratio_max", float("nan")), line.get(f"{ALL}/ratio_min", float("nan")))
            loss = LossStats(all_means, by_kind, *ratio)
        channels: dict[str, dict[str, float]] = {}
        for key, value in line.items():
            if key.startswith(ESTIMATOR_PREFIX):
                figure, _, channel = key.removeprefix(ESTIMATOR_PREFIX).partition("/")
                if figure in FIGURES and channel:
                    channels.setdefault(channel, {})[figure] = float(value)
        return cls(
            loss=loss,
            estimator=EstimatorStats(
                {c: ChannelStats(v.get("zero_variance", 0.0), v.get("present")) for c, v in channels.items()}
            ),
            grad_norm=float(line.get("grad_norm", 0.0)),
            constrained_excluded=int(line.get("tokens/constrained_excluded", 0)),
            groups=GroupCounts.from_log(line),
            lr=None if line.get("lr") is None else float(line["lr"]),
        )
