"""HierR: the two reward channels of one trajectory, every component stored (docs/design.md#hierr).

`score_trajectory` is pure and synchronous (the learner's `slca train` calls it directly); with the rule
judge it is deterministic. Storage and idempotence (trajectory id + scorer version) live in `workers.pipeline`
and `workers.groups`.
"""

from __future__ import annotations

from slca.contracts import GroundTruth, Reward, Trajectory
from workers.scoring.checks import all_hold, reply_checks
from workers.scoring.execution import ExecResult, exec_gold, exec_outcome, repeated_calls
from workers.scoring.extract import Observed, observe
from workers.scoring.judges import get_judge
from workers.scoring.reply import facts_present
from workers.scoring.shaping import guarded_pref, invalid_format, rltr_plan
from workers.scoring.success import task_success
from workers.settings import WorkerSettings


def score_trajectory(traj: Trajectory, s: WorkerSettings) -> Reward:
    """The reward of one trajectory under the caller's scoring settings (`workers` section)."""
    obs = observe(traj)
    gt = traj.ground_truth
    exec_result = _execution(obs, gt, s)
    verdict = get_judge(s.judge)(obs, gt, s, traj.messages)
    pref, penalized = guarded_pref(verdict.score, obs, gt, s)
    # the reply's rule checks decide `success` whatever judge rates r_pref
    baselines = _baselines(obs, gt, exec_result, all_hold(reply_checks(obs, gt, s, traj.messages)))
    components = {
        **exec_result.components,
        **verdict.components,
        "exec_outcome_mode": float(exec_result.mode == "outcome"),
        "pref_raw": verdict.score,
        **baselines,
        "rltr_plan": rltr_plan(baselines["completeness"], obs, s),
    }
    return Reward(
        trajectory_id=traj.id,
        exec=exec_result.value,
        pref=pref,
        components=components,
        per_call=exec_result.per_call,
        omission_penalized=penalized,
        scorer_version=s.scorer_version,
        judge=s.judge,
    )


def _execution(obs: Observed, gt: GroundTruth | None, s: WorkerSettings) -> ExecResult:
    mode = s.exec_mode
    if mode == "auto":
        mode = "outcome" if gt is None or (not gt.calls and gt.tool_needed) else "gold"
    if mode == "outcome":
        return exec_outcome(obs, gt)
    return exec_gold(obs, gt or GroundTruth(), s)


def _baselines(obs: Observed, gt: GroundTruth | None, ex: ExecResult, reply_holds: bool) -> dict[str, float]:
    """Components the learner's baseline estimators read (docs/design.md#advantages: ToolPO and RLTR), and the headline
    `success` (`workers.scoring.success`)."""
    gold = gt.calls if gt else []
    if gold:
        action = sum(m.exact for m in ex.matches) / len(gold)  # ToolPO: correct calls / gold calls
        completeness = sum(m.correct for m in ex.matches) / len(gold)  # RLTR: every gold value covered
    elif ex.mode == "outcome":
        action = completeness = ex.components["outcome_complete"]
    else:  # no tool needed: doing nothing is complete and correct
        action = completeness = float(not obs.calls)
    return {
        "success": float(task_success(obs, gt, ex, reply_holds)),
        "action": action,
        "call_accuracy": action,  # the name learner/advantages reads for ToolPO's R_action
        "completeness": completeness,
        "facts": facts_present(obs.reply, gt.facts if gt else []),
        "repeated_calls": float(repeated_calls(obs)),
        "failed_calls": float(obs.failed_calls),
        "invalid_format": float(invalid_format(obs)),
        "num_calls": float(len(obs.calls)),
        "tool_turns": float(len(obs.turns)),
    }
