"""Policy losses: one registry, `loss(inputs, config) -> (scalar, LossSums)` (docs/design.md#loss).

Shapes: N generated tokens of a micro-batch (one packed group), flattened; `seq (N,)` says which
trajectory each token belongs to. Aggregation divides by the step's totals (`LossInputs.total_tokens`,
`total_seqs`) so that gradient accumulation over micro-batches equals one big batch. The knobs are
`learner.loss` (`LossSettings`), passed as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from learner.advantages.batch import KIND_CODE
from learner.settings import LossSettings
from learner.step_stats import TRAINED_KINDS, LossSums, TokenFigures


@dataclass
class LossInputs:
    logprobs: torch.Tensor
    """(N,) log π_θ of the sampled tokens (requires grad)."""
    behaviour: torch.Tensor
    """(N,) log π_behaviour recorded by the engine at sampling time."""
    advantages: torch.Tensor
    """(N,) per-token advantages from the estimator."""
    seq: torch.Tensor
    """(N,) int64 trajectory index of each token within the step."""
    kinds: torch.Tensor
    """(N,) segment-kind codes (for per-kind metrics)."""
    entropy: torch.Tensor | None = None
    """(N,) entropy of π_θ (detached), for metrics."""
    ref_logprobs: torch.Tensor | None = None
    """(N,) log π_ref of a frozen reference, for the k3 KL."""
    total_tokens: int = 1
    """Generated tokens in the whole step (token_mean divides by it; a micro-batch holds only part of them)."""
    total_seqs: int = 1
    """Trajectories in the whole step (seq_mean divides by it)."""


LossFn = Callable[[LossInputs, LossSettings], tuple[torch.Tensor, LossSums]]
LOSSES: dict[str, LossFn] = {}


class UnknownLossError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def register_loss(name: str):
    def deco(fn: LossFn) -> LossFn:
        LOSSES[name] = fn
        return fn

    return deco


def get_loss(name: str) -> LossFn:
    try:
        return LOSSES[name]
    except KeyError:
        raise UnknownLossError(f"unknown policy loss {name!r}; known: {', '.join(sorted(LOSSES))}") from None


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """(N,) k3 estimator of KL(π_θ‖π_ref): `exp(ref − logp) − (ref − logp) − 1` (Schulman, 'Approximating KL')."""
    d = ref_logprobs - logprobs
    return torch.exp(d) - d - 1


def aggregate(per_token: torch.Tensor, inputs: LossInputs, config: LossSettings) -> torch.Tensor:
    """token_mean: Σ_t ℓ_t / total_tokens; seq_mean: Σ_i mean_{t∈i} ℓ_t / total_seqs."""
    if config.aggregation == "token_mean":
        return per_token.sum() / max(inputs.total_tokens, 1)
    if config.aggregation == "seq_mean":
        seq_ids, inverse, counts = torch.unique(inputs.seq, return_inverse=True, return_counts=True)
        per_seq = torch.zeros(len(seq_ids), dtype=per_token.dtype, device=per_token.device).index_add(
            0, inverse, per_token
        )
        return (per_seq / counts.to(per_token.dtype)).sum() / max(inputs.total_seqs, 1)
    raise ValueError(f"aggregation: unknown {config.aggregation!r}; known: token_mean, seq_mean")


def _surrogate(ratio: torch.Tensor, adv: torch.Tensor, config: LossSettings) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A) and (N,) bool: the clipped branch was taken."""
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - config.eps_low, 1 + config.eps_high) * adv
    return -torch.minimum(unclipped, clipped), clipped < unclipped


def _finish(per_token, ratio, was_clipped, inputs, config):
    kl = None
    if config.kl_beta > 0 and inputs.ref_logprobs is not None:
        kl = k3_kl(inputs.logprobs, inputs.ref_logprobs)
        per_token = per_token + config.kl_beta * kl
    loss = aggregate(per_token, inputs, config)
    return loss, token_metrics(inputs, ratio.detach(), was_clipped, kl)


@register_loss("clip")
def clipped_surrogate(inputs: LossInputs, config: LossSettings) -> tuple[torch.Tensor, LossSums]:
    """Token-level clipped surrogate with behaviour logprobs (docs/design.md#loss; PPO arXiv 1707.06347, DAPO
    clip-higher arXiv 2503.14476): `ℓ_t = −min(ρ_t A_t, clip(ρ_t, 1−ε_low, 1+ε_high) A_t) + β·KL_k3`,
    `ρ_t = exp(log π_θ − log π_behaviour)` (this also corrects for staleness)."""
    ratio = torch.exp(inputs.logprobs - inputs.behaviour)
    per_token, was_clipped = _surrogate(ratio, inputs.advantages, config)
    return _finish(per_token, ratio, was_clipped, inputs, config)


@register_loss("clip_tis")
def clipped_surrogate_tis(inputs: LossInputs, config: LossSettings) -> tuple[torch.Tensor, LossSums]:
    """Clipped surrogate with truncated importance weights (docs/design.md#loss):
    `ℓ_t = −min(min(ρ_t, C)·A_t, clip(ρ_t, 1−ε_low, 1+ε_high)·A_t) + β·KL_k3`, C = `tis_cap`, with
    `ρ_t = exp(log π_θ − log π_behaviour)` from the trajectory's behaviour logprobs, as in `clip`.

    For A ≥ 0 it equals `clip` (the clip caps ρ at 1+ε_high < C). For A < 0 the unclipped branch is unbounded
    in `clip`: a token the policy now likes far more than the sampler did (stale, or an engine/learner logprob
    mismatch) would dominate the batch; here it contributes at most C·|A| and no gradient — dual-clip PPO
    (Ye et al., arXiv 1912.09729), i.e. the importance weight truncated at C (IMPALA's V-trace, arXiv 1802.01561).

    Choice: Yao et al.'s decoupled form ('Your efficient RL framework secretly brings you off-policy RL
    training', 2025: PPO ratio against the learner's own π_old times min(C, π_old/π_beh)) needs π_old at the
    sampling version, which the learner does not hold; with one update per batch its π_old is π_θ itself,
    so that ratio is ≡ 1 and never clips. The ratio here is always against the behaviour logprobs."""
    ratio = torch.exp(inputs.logprobs - inputs.behaviour)
    truncated = ratio.clamp(max=config.tis_cap) * inputs.advantages
    clipped = ratio.clamp(1 - config.eps_low, 1 + config.eps_high) * inputs.advantages
    per_token = -torch.minimum(truncated, clipped)
    # no gradient where the clipped branch is taken, or the truncated one with ρ above the cap
    bounded = (clipped < truncated) | ((ratio > config.tis_cap) & (truncated <= clipped))
    return _finish(per_token, ratio, bounded, inputs, config)


@torch.no_grad()
def token_metrics(inputs: LossInputs, ratio, was_clipped, kl) -> LossSums:
    """Sums over the micro-batch's tokens, all and per segment kind (the trainer merges a step's and takes means):
    advantage, |advantage|, advantage², clip fraction, ratio, KL, entropy, behaviour-vs-recompute logprob gap."""
    gap = (inputs.behaviour - inputs.logprobs.detach()).abs()

    def sums(mask: torch.Tensor) -> TokenFigures:
        return TokenFigures(
            tokens=int(mask.sum()),
            adv=float(inputs.advantages[mask].sum()),
            adv_abs=float(inputs.advantages[mask].abs().sum()),
            adv_sq=float(inputs.advantages[mask].square().sum()),
            clip=float(was_clipped[mask].sum()),
            ratio=float(ratio[mask].sum()),
            logprob_gap=float(gap[mask].sum()),
            entropy=None if inputs.entropy is None else float(inputs.entropy[mask].sum()),
            kl=None if kl is None else float(kl[mask].sum()),
        )

    by_kind = {}
    for kind in TRAINED_KINDS:
        mask = inputs.kinds == KIND_CODE[kind]
        if bool(mask.any()):
            by_kind[kind] = sums(mask)
    return LossSums(
        all=sums(torch.ones_like(inputs.kinds, dtype=torch.bool)),
        by_kind=by_kind,
        ratio_max=float(ratio.max()),
        ratio_min=float(ratio.min()),
    )
