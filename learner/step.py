"""From a `RolloutGroup` to a differentiable loss: advantages, token selection, packed forward.

`prepare_group` is model-free (estimator + bookkeeping); `group_loss` runs the model on one packed group.

Turns sampled under a grammar (forced `tool_choice`; `Trajectory.meta["constrained_turns"]`) are left out of
the loss: their behaviour logprobs are renormalised over the tokens the grammar allowed, while the learner
recomputes them unconstrained, so ρ = π_θ/π_behaviour is biased low on exactly those tokens (the clip would
then fire on a gap that is not a policy change). Choice: exclude them altogether (no policy gradient, no KL,
not in the token mean) rather than keep them with advantage 0, which would still count them in the mean and
the KL. Recomputing the learner's logprobs under the same grammar mask would keep them; we do not (the learner
has no grammar engine). Advantages are still estimated on whole trajectories: the reward of a constrained
turn reaches the policy through the member's other tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from learner.advantages import batch_of, estimate
from learner.forward import select_rows, token_logprobs
from learner.loss import LossInputs, get_loss
from learner.packing import pack_group
from learner.settings import AdvantageSettings, LossSettings
from learner.step_stats import EstimatorStats, LossSums
from slca.contracts import RolloutGroup


@dataclass
class PreparedGroup:
    group_id: str
    tokens: list[list[int]]
    selected: list[torch.Tensor]
    """Per member, (n_i,) indices of its generated tokens (all ≥ 1)."""
    behaviour: torch.Tensor
    """(N,) behaviour logprobs of the selected tokens, members concatenated."""
    advantages: torch.Tensor
    """(N,) float32."""
    kinds: torch.Tensor
    """(N,) kind codes."""
    seq: torch.Tensor
    """(N,) member index within the group."""
    estimator_stats: EstimatorStats
    constrained_excluded: int = 0
    """Generated tokens left out because their turn was sampled under a grammar."""

    @property
    def num_tokens(self) -> int:
        return int(self.advantages.numel())

    @property
    def all_zero(self) -> bool:
        return bool((self.advantages == 0).all())


def prepare_group(group: RolloutGroup, estimator: str, config: AdvantageSettings) -> PreparedGroup:
    batch = batch_of(group)
    advantages, stats = estimate(estimator, batch, config)
    selected, behaviour, adv, kinds, seq, excluded = [], [], [], [], [], 0
    for i, (traj, layout, a) in enumerate(zip(group.trajectories, batch.members, advantages)):
        trainable = layout.generated & ~constrained_mask(traj, layout.turns)
        excluded += int(layout.generated.sum() - trainable.sum())
        idx = torch.nonzero(trainable).flatten()
        idx = idx[idx >= 1]  # token 0 has no context to be predicted from
        selected.append(idx)
        lp = torch.tensor([traj.logprobs[t] for t in idx.tolist()], dtype=torch.float32)
        behaviour.append(lp)
        adv.append(a[idx])
        kinds.append(layout.kinds[idx])
        seq.append(torch.full((idx.numel(),), i, dtype=torch.long))
    return PreparedGroup(
        group_id=group.group_id,
        tokens=[list(t.tokens) for t in group.trajectories],
        selected=selected,
        behaviour=torch.cat(behaviour),
        advantages=torch.cat(adv),
        kinds=torch.cat(kinds),
        seq=torch.cat(seq),
        estimator_stats=stats,
        constrained_excluded=excluded,
    )


def member_successes(group: RolloutGroup) -> list[float]:
    """Task success (the reward component 'success', 0/1) of the members whose reward carries one."""
    return [r.components["success"] for r in group.rewards if "success" in r.components]


def uniform_success(group: RolloutGroup) -> bool:
    """Every member carries a success and they are all equal (all solved, or all failed): what difficulty screening
    (`learner.screen_success_variance`) leaves out. A group where a member lacks it is not judged."""
    values = member_successes(group)
    return len(values) == group.size and len(set(values)) == 1


def constrained_mask(traj, turns: torch.Tensor) -> torch.Tensor:
    """(T,) bool: tokens of the turns the trajectory lists as sampled under a grammar."""
    constrained = traj.meta.get("constrained_turns") or []
    return torch.isin(turns, torch.tensor(constrained, dtype=torch.long))


def group_loss(
    model,
    prepared: PreparedGroup,
    loss: LossSettings,
    totals: tuple[int, int],
    autocast: bool,
    ref_model=None,
    seq_offset: int = 0,
    share_prefix: bool = True,
) -> tuple[torch.Tensor, LossSums, torch.Tensor]:
    """Loss of one group (already divided by the step's `totals`: generated tokens, trajectories), its figures'
    sums, and the (N,) logprobs.

    `model` is a `LogprobModule` (possibly DDP-wrapped); `ref_model` a plain HF model."""
    packed = pack_group(prepared.tokens, share_prefix)
    rows, targets = select_rows(packed, prepared.tokens, prepared.selected)
    out = model(packed, rows, targets, autocast)
    device = out.logprobs.device
    ref = None
    if ref_model is not None and loss.kl_beta > 0:
        with torch.no_grad():
            ref = token_logprobs(ref_model, packed, rows, targets, autocast).logprobs
    inputs = LossInputs(
        logprobs=out.logprobs,
        behaviour=prepared.behaviour.to(device),
        advantages=prepared.advantages.to(device),
        seq=(prepared.seq + seq_offset).to(device),
        kinds=prepared.kinds.to(device),
        entropy=out.entropy,
        ref_logprobs=ref,
        total_tokens=totals[0],
        total_seqs=totals[1],
    )
    value, sums = get_loss(loss.name)(inputs, loss)
    return value, sums, out.logprobs
