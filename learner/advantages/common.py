"""Vectorised building blocks shared by the estimators: presence-filtered group normalisation, flattening,
reasoning routing. Shapes: G members, N = Σ T_i tokens of the group."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from learner.advantages.batch import REASONING, SUMMARY, TOOL_CALL, AdvantageBatch
from learner.settings import AdvantageSettings
from learner.step_stats import MIN_PRESENT, ChannelStats

ZERO_VARIANCE_TOL = 1e-12


@dataclass(frozen=True)
class Normalised:
    """`norm_c(r)` over the present members P_c (G,), float64; 0 outside P_c and when |P_c| < `MIN_PRESENT`."""

    values: torch.Tensor
    zero_variance: bool
    """|P_c| ≥ 2 and all present rewards equal: the channel contributes nothing for this group."""
    present: int


def group_norm(rewards: torch.Tensor, present: torch.Tensor, eps: float) -> Normalised:
    """`norm_c(r)_i = (r_i − mean_{P_c} r) / (std_{P_c} r + ε)` for i ∈ P_c (docs/design.md#advantages), std unbiased.

    rewards, present: (G,). Computed in float64 on a rescaled copy so that huge rewards do not overflow
    the variance (the result is mathematically the same)."""
    r = rewards.to(torch.float64)
    n = int(present.sum())
    if n < MIN_PRESENT:
        return Normalised(torch.zeros_like(r), False, n)
    mean = r[present].mean()
    centred = torch.where(present, r - mean, torch.zeros_like(r))
    scale = centred.abs().max()
    if scale <= 0 or not torch.isfinite(scale):
        return Normalised(torch.zeros_like(r), True, n)
    std = (centred[present] / scale).std(unbiased=True) * scale
    if std <= ZERO_VARIANCE_TOL * max(1.0, float(r[present].abs().max())):
        return Normalised(torch.zeros_like(r), True, n)
    return Normalised(centred / (std + eps), False, n)


@dataclass(frozen=True)
class FlatGroup:
    """All tokens of a group in one row: kinds (N,), turns (N,), member (N,) index, sizes [T_i]."""

    kinds: torch.Tensor
    credit: torch.Tensor
    """(N,) kinds after reasoning routing: the channel each token is credited to."""
    turns: torch.Tensor
    member: torch.Tensor
    sizes: list[int]

    def split(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return [t.to(torch.float32) for t in torch.split(flat, self.sizes)]


def route_reasoning(kinds: torch.Tensor, mode: str) -> torch.Tensor:
    """(T,) kinds with each reasoning token replaced by the kind of the tool_call/summary token it precedes
    ('next'; trailing reasoning falls back to the previous one) or follows ('prev'); 'none' leaves it
    REASONING, which no channel credits."""
    if mode not in ("next", "prev", "none"):
        raise ValueError(f"reasoning_route: unknown mode {mode!r}; known: next, prev, none")
    is_reasoning = kinds == REASONING
    if mode == "none" or not bool(is_reasoning.any()):
        return kinds
    anchor_pos = torch.nonzero((kinds == TOOL_CALL) | (kinds == SUMMARY)).flatten()
    if anchor_pos.numel() == 0:
        return kinds
    pos = torch.arange(kinds.numel())
    nxt = torch.searchsorted(anchor_pos, pos, right=False)  # first anchor at or after pos
    prv = torch.searchsorted(anchor_pos, pos, right=True) - 1  # last anchor before pos
    if mode == "next":
        pick = torch.where(nxt < anchor_pos.numel(), nxt, prv)
    else:
        pick = torch.where(prv >= 0, prv, nxt)
    routed = kinds[anchor_pos[pick.clamp(0, anchor_pos.numel() - 1)]]
    return torch.where(is_reasoning, routed, kinds)


def flatten(batch: AdvantageBatch, config: AdvantageSettings) -> FlatGroup:
    kinds = torch.cat([m.kinds for m in batch.members])
    credit = torch.cat([route_reasoning(m.kinds, config.reasoning_route) for m in batch.members])
    turns = torch.cat([m.turns for m in batch.members])
    sizes = [int(m.kinds.numel()) for m in batch.members]
    member = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    return FlatGroup(kinds, credit, turns, member, sizes)


def first_generated(batch: AdvantageBatch) -> torch.Tensor:
    """(N,) bool: the first policy-generated token of each member (none for a member that generated nothing)."""
    firsts = []
    for m in batch.members:
        gen = m.generated
        firsts.append(gen & (torch.cumsum(gen.long(), 0) == 1))
    return torch.cat(firsts)


def presence(batch: AdvantageBatch, code: int) -> torch.Tensor:
    """(G,) bool: member i contains a segment of kind `code`."""
    return torch.tensor([m.has(code) for m in batch.members], dtype=torch.bool)


def pref_rewards(batch: AdvantageBatch) -> torch.Tensor:
    """(G,) preference rewards as scored: the omission guard is already in them (`workers.scoring.shaping`
    is its one home; applying a second rule here would let two definitions of 'no call' disagree)."""
    return torch.tensor([r.pref for r in batch.rewards], dtype=torch.float64)


def successes(batch: AdvantageBatch) -> torch.Tensor:
    """(G,) task success as scored (component 'success', 0/1); 0 where a reward lacks it."""
    return torch.tensor([r.components.get("success", 0.0) for r in batch.rewards], dtype=torch.float64)


def exec_channel(scored: torch.Tensor, batch: AdvantageBatch, config: AdvantageSettings) -> torch.Tensor:
    """(G,) the exec-channel reward an estimator normalises: its scored one (r_exec, or its own action or plan
    reward) plus `success_weight·success` (`AdvantageSettings.success_weight`; 0: `scored` unchanged)."""
    if config.success_weight == 0:
        return scored
    return scored + config.success_weight * successes(batch)


def exec_rewards(batch: AdvantageBatch, config: AdvantageSettings) -> torch.Tensor:
    """(G,) r_exec as scored, with the success term (`exec_channel`)."""
    scored = torch.tensor([r.exec for r in batch.rewards], dtype=torch.float64)
    return exec_channel(scored, batch, config)


def channel_stats(norm: Normalised) -> ChannelStats:
    """One channel's figures for one group: 1 if zero variance, and the members present."""
    return ChannelStats(zero_variance=float(norm.zero_variance), present=float(norm.present))
