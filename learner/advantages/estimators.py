"""The registered advantage estimators (docs/design.md#advantages). Each maps a group to per-token advantages.

Shapes: G members; member i has T_i tokens; each returns `([A_i (T_i,) float32], EstimatorStats)`, its figures
per channel it declares (`register_estimator(name, channels=…)`). Advantages are
zero on non-generated tokens (system, user, tool_result) by construction.
"""

from __future__ import annotations

import torch

from learner.advantages.batch import GENERATED_CODES, SUMMARY, TOOL_CALL, AdvantageBatch
from learner.advantages.common import (
    FlatGroup,
    channel_stats,
    exec_channel,
    exec_rewards,
    first_generated,
    flatten,
    group_norm,
    pref_rewards,
    presence,
)
from learner.advantages.registry import register_estimator
from learner.settings import AdvantageSettings
from learner.step_stats import ChannelStats, EstimatorStats


def _generated(kinds: torch.Tensor) -> torch.Tensor:
    return torch.isin(kinds, torch.tensor(GENERATED_CODES))


def _any_generated(batch: AdvantageBatch) -> torch.Tensor:
    return torch.tensor([bool(m.generated.any()) for m in batch.members], dtype=torch.bool)


@register_estimator("grpo", channels=("scalar",))
def grpo(batch: AdvantageBatch, config: AdvantageSettings) -> tuple[list[torch.Tensor], EstimatorStats]:
    """Trajectory-level GRPO (DeepSeekMath, arXiv 2402.03300): `A_i = norm(R)_i` on every generated token,
    `R = w_exec·r_exec + w_pref·r_pref` (r_pref as scored: after the scorer's omission guard; r_exec with the
    success term, `success_weight`)."""
    flat = flatten(batch, config)
    scalar = config.w_exec * exec_rewards(batch, config) + config.w_pref * pref_rewards(batch)
    norm = group_norm(scalar, _any_generated(batch), config.eps)
    adv = torch.where(_generated(flat.kinds), norm.values[flat.member], 0.0)
    return flat.split(adv), EstimatorStats({"scalar": channel_stats(norm)})


def _turn_level_exec(batch: AdvantageBatch, config: AdvantageSettings, flat, fallback: torch.Tensor):
    """(N,) exec advantages per token where member i has per-call scores at the token's turn t:
    `w_exec·norm_t(s)_i`, normalised over the members scored at turn t (GiGPO-style step grouping);
    other tokens keep `fallback`. Several calls in one turn are averaged. Also its channel `exec_turn` (turns of
    zero variance; None when no member has per-call scores)."""
    turns = sorted({c.turn for r in batch.rewards for c in r.per_call})
    if not turns:
        return fallback, None
    scores = torch.full((batch.size, len(turns)), float("nan"), dtype=torch.float64)
    for i, reward in enumerate(batch.rewards):
        for k, t in enumerate(turns):
            vals = [c.score for c in reward.per_call if c.turn == t]
            if vals:
                scores[i, k] = sum(vals) / len(vals)
    out, zero = fallback.clone(), 0
    for k, t in enumerate(turns):
        present = ~torch.isnan(scores[:, k])
        norm = group_norm(torch.nan_to_num(scores[:, k]), present, config.eps)
        zero += norm.zero_variance
        # the segment's own tool_call tokens only: a decision token (decision_token) keeps the trajectory's score
        has = present[flat.member] & (flat.turns == t) & (flat.credit == TOOL_CALL)
        out = torch.where(has, config.w_exec * norm.values[flat.member], out)
    return out, ChannelStats(zero_variance=float(zero))


def exec_scope(batch: AdvantageBatch, config: AdvantageSettings, flat: FlatGroup) -> tuple[torch.Tensor, torch.Tensor]:
    """(credit (N,), P_exec (G,)) of the exec channel. Plain SLCA: tool_call tokens, the members with a tool_call
    segment. `config.decision_token` on a group whose gold has no call: every member that generated anything,
    and a member without a tool_call segment is credited on its first generated token (its decision not to
    call), which then leaves the summary channel: one token, one channel."""
    callers = presence(batch, TOOL_CALL)
    if not (config.decision_token and batch.tool_needed is False):
        return flat.credit, callers
    decision = first_generated(batch) & ~callers[flat.member]
    return torch.where(decision, TOOL_CALL, flat.credit), callers | _any_generated(batch)


@register_estimator("slca", channels=("exec", "pref", "exec_turn"))
def slca(batch: AdvantageBatch, config: AdvantageSettings) -> tuple[list[torch.Tensor], EstimatorStats]:
    """Segment-Locked Credit Assignment (SLCA-GRPO, arXiv 2609.29050).

    tool_call tokens: `w_exec·norm_{P_exec}(r_exec)_i`; summary tokens: `w_pref·norm_{P_pref}(r_pref)_i`, with
    P_c the members in which segment c is present and `|P_c| < MIN_PRESENT (2) → 0`. Reasoning tokens are credited to
    the segment they precede (`config.reasoning_route`). Nothing crosses channels. `config.turn_level`: a
    tool_call segment at turn t takes the group-normalised per-call score of turn t where one exists.
    `config.decision_token`: on no-tool tasks the decision not to call is an exec token too (`exec_scope`).
    `config.success_weight`: r_exec + success_weight·success (`exec_channel`)."""
    flat = flatten(batch, config)
    credit, exec_present = exec_scope(batch, config, flat)
    n_exec = group_norm(exec_rewards(batch, config), exec_present, config.eps)
    n_pref = group_norm(pref_rewards(batch), presence(batch, SUMMARY), config.eps)
    exec_tok = config.w_exec * n_exec.values[flat.member]
    channels = {"exec": channel_stats(n_exec), "pref": channel_stats(n_pref)}
    if config.turn_level:
        exec_tok, turn_stats = _turn_level_exec(batch, config, flat, exec_tok)
        if turn_stats is not None:
            channels["exec_turn"] = turn_stats
    pref_tok = config.w_pref * n_pref.values[flat.member]
    adv = torch.where(credit == TOOL_CALL, exec_tok, torch.where(credit == SUMMARY, pref_tok, 0.0))
    return flat.split(adv), EstimatorStats(channels)


@register_estimator("toolpo", channels=("success", "action"))
def toolpo(batch: AdvantageBatch, config: AdvantageSettings) -> tuple[list[torch.Tensor], EstimatorStats]:
    """ToolPO (DeepAgent, arXiv 2510.21618): `A_global = norm(R_success)` on every generated token plus
    `λ·norm_{P_exec}(R_action)` on tool_call tokens. R_success = component 'success' (else the scalar R);
    R_action = component 'call_accuracy' = correct calls / gold calls (else r_exec), plus the success term
    (`success_weight`, `exec_channel`)."""
    flat = flatten(batch, config)
    pref = pref_rewards(batch)
    success = torch.tensor(
        [
            r.components.get("success", config.w_exec * r.exec + config.w_pref * float(p))
            for r, p in zip(batch.rewards, pref)
        ],
        dtype=torch.float64,
    )
    scored_action = [r.components.get("call_accuracy", r.exec) for r in batch.rewards]
    action = exec_channel(torch.tensor(scored_action, dtype=torch.float64), batch, config)
    n_global = group_norm(success, _any_generated(batch), config.eps)
    n_action = group_norm(action, presence(batch, TOOL_CALL), config.eps)
    adv = torch.where(_generated(flat.kinds), n_global.values[flat.member], 0.0)
    adv = adv + torch.where(flat.credit == TOOL_CALL, config.toolpo_lambda * n_action.values[flat.member], 0.0)
    return flat.split(adv), EstimatorStats({"success": channel_stats(n_global), "action": channel_stats(n_action)})


def rltr_reward(batch: AdvantageBatch) -> torch.Tensor:
    """(G,) RLTR planner reward: the scorer's component 'rltr_plan' (−1 for invalid call format, else
    completeness − μ·repeated − λ·failed; shaped in `workers.scoring.shaping`, never re-derived here). A scorer
    that does not shape it (a plug-in): its 'completeness', else r_exec, unpenalised."""
    return torch.tensor(
        [r.components.get("rltr_plan", r.components.get("completeness", r.exec)) for r in batch.rewards],
        dtype=torch.float64,
    )


@register_estimator("rltr", channels=("plan",))
def rltr(batch: AdvantageBatch, config: AdvantageSettings) -> tuple[list[torch.Tensor], EstimatorStats]:
    """RLTR (arXiv 2508.19598): only the planner is trained. tool_call tokens get `norm_{P_exec}(R_plan)_i`
    (see `rltr_reward`; plus the success term, `success_weight`, `exec_channel`); summary tokens get 0."""
    flat = flatten(batch, config)
    norm = group_norm(exec_channel(rltr_reward(batch), batch, config), presence(batch, TOOL_CALL), config.eps)
    adv = torch.where(flat.credit == TOOL_CALL, norm.values[flat.member], 0.0)
    return flat.split(adv), EstimatorStats({"plan": channel_stats(norm)})
