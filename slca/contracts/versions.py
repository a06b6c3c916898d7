"""Which weight version callers get, and why (docs/design.md#versions): the promotion record every serve replica
follows and the promotion gate's decisions.

Two roles: the *candidate* is the learner's newest version (what serve's weight follower swaps in; the training
feed, the probe and `serve.canary_share` of callers get it); the *promoted* version is what every other caller gets.
The promotion record (`Promotion`) is the one truth about the second: written by serve's admin endpoint (the gate,
`slca promote`, an automatic rollback) to the Redis key `<prefix>:promotion` and to `<data_dir>/promotion.json`,
read back at every start, so a restart keeps it. Every gate decision is a `GateDecision`, appended to the
Redis list `<prefix>:gate:decisions` (bounded) and to `<data_dir>/gate/decisions.jsonl`; every automatic rollback
on scored success is a `SuccessRollback`, in `<prefix>:gate:rollbacks` and `<data_dir>/gate/rollbacks.jsonl`.
While the gate judges, the key `<prefix>:gate:feed-hold` holds the training feed (`gate_feed_hold_key`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from slca.contracts.queues import Streams
from slca.contracts.wire import Contract

PIN = re.compile(r"^(?P<name>.*)@v(?P<version>\d{1,9})$")
"""A `model` value pinning a version: `<served name>@v<N>` (e.g. `SmolLM2-135M-Instruct@v12`)."""

PIN_HEADER = "X-SLCA-Pin-Version"
"""Request header pinning a version: `12` or `v12`."""
VERSION_HEADER = "X-SLCA-Policy-Version"
"""Response header: the weight version that produced the answer (the newest when an answer spans a swap)."""
ROLE_HEADER = "X-SLCA-Role"
"""Request header `candidate`: ask for the candidate version (a key with the `record` scope only)."""

PromotionReason = Literal["start", "gate", "operator", "rollback", "auto-rollback"]
GateOutcome = Literal["promote", "hold", "skip"]
"""`promote`: the candidate passed the rule and is now promoted; `hold`: it did not, the promoted version stays;
`skip`: not judged (rolled back before, or the evaluation failed)."""

HISTORY = 16
"""Earlier promoted versions a `Promotion` remembers (the rollback targets, newest last)."""


class Promotion(Contract):
    """The promoted version, the versions promoted before it (for `--rollback`) and the versions rolled back (never
    promoted again automatically)."""

    promoted: int = Field(ge=0)
    history: list[int] = []
    """Versions promoted before `promoted`, oldest first (at most `HISTORY`)."""
    rolled_back: list[int] = []
    """Versions rolled back by an operator or by the live-signal guard: the gate never promotes them again."""
    reason: PromotionReason = "start"
    at: float = 0.0
    """Unix time of the change."""

    def promote(self, version: int, reason: PromotionReason, at: float) -> "Promotion":
        """The record after promoting `version` (the current one joins the history)."""
        if version == self.promoted:
            return self.model_copy(update={"reason": reason, "at": at})
        history = [v for v in self.history if v != version] + [self.promoted]
        return Promotion(
            promoted=version, history=history[-HISTORY:], rolled_back=self.rolled_back, reason=reason, at=at
        )

    def rollback_target(self) -> int | None:
        """The version a rollback promotes again: the last earlier one not rolled back (None: nothing to go back to)."""
        earlier = [v for v in self.history if v not in self.rolled_back and v != self.promoted]
        return earlier[-1] if earlier else None

    def roll_back(self, reason: PromotionReason, at: float) -> "Promotion":
        """The record after rolling back: the last earlier version (never one rolled back) is promoted again and the
        current one is marked rolled back. ValueError when there is nothing to go back to."""
        target = self.rollback_target()
        if target is None:
            raise ValueError(f"v{self.promoted} has no earlier promoted version to roll back to")
        history = [v for v in self.history if v != target]
        rolled = sorted(set(self.rolled_back) | {self.promoted})
        return Promotion(promoted=target, history=history, rolled_back=rolled, reason=reason, at=at)


class GateDecision(Contract):
    """One judgement of the promotion gate: the candidate against the promoted version on the same gate items."""

    candidate: int = Field(ge=0)
    promoted: int = Field(ge=0)
    outcome: GateOutcome
    why: str
    """The rule's verdict in words (e.g. `lower bound -0.031 > -0.05`)."""
    n: int = 0
    """Gate items paired."""
    candidate_success: float | None = None
    promoted_success: float | None = None
    diff: float | None = None
    """candidate − promoted success over the paired items."""
    ci_low: float | None = None
    ci_high: float | None = None
    """Paired bootstrap 95% interval of `diff`."""
    candidate_only: int = 0
    """Items only the candidate solved."""
    promoted_only: int = 0
    mcnemar_p: float | None = None
    margin: float = 0.05
    require_better: bool = False
    seconds: float = 0.0
    """Evaluation time of this decision (the candidate's items; the promoted version's outcomes are cached)."""
    items_file: str | None = None
    """The candidate's per-item records (JSON lines), relative to `<data_dir>/gate/`."""
    at: float = 0.0


class SuccessRollback(Contract):
    """One automatic rollback on scored success (`ops/run/gate/success_guard.py`): the promoted version's success on
    the trajectories the workers scored (`stats:rewards`) fell below the previous promoted version's by more than
    the margin, by a one-sided bound (the gate sends it to serve, which rolls back only while `version` is still the
    promoted one)."""

    version: int = Field(ge=0)
    """The promoted version judged (and rolled back)."""
    previous: int = Field(ge=0)
    """The previous promoted version it was compared with: the one callers get again."""
    outcome: Literal["rollback", "refused"] = "rollback"
    """`refused`: serve did not roll back (the promoted version changed meanwhile, nothing to go back to)."""
    why: str
    n: int = Field(ge=0)
    """Scored trajectories of `version` in the window."""
    previous_n: int = Field(ge=0)
    success: float
    previous_success: float
    diff: float
    """success − previous_success."""
    ci_high: float
    """One-sided 95% upper bound of `diff` (Newcombe's hybrid score interval): rolled back when below −margin."""
    margin: float
    at: float = 0.0


def promotion_key(streams: Streams) -> str:
    """Key: the JSON `Promotion` every replica follows."""
    return streams.stats("promotion")


def gate_decisions_key(streams: Streams) -> str:
    """List: recent JSON `GateDecision`s, newest last (bounded)."""
    return streams.stats("gate:decisions")


def gate_feed_hold_key(streams: Streams) -> str:
    """Key (with an expiry): set by the gate while it judges a candidate, so the training feed sends nothing
    meanwhile (`ops.gate_holds_feed`); deleted when the judging ends, and expired after `ops.gate_hold_s` when a
    gate dies. The value is JSON: the candidate, the promoted version and the time it was set."""
    return streams.stats("gate:feed-hold")


def rollback_decisions_key(streams: Streams) -> str:
    """List: recent JSON `SuccessRollback`s, newest last (bounded)."""
    return streams.stats("gate:rollbacks")
