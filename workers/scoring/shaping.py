"""Reward shaping, in one place (docs/design.md#hierr): the omission guard on the summary channel and RLTR's planner
reward with its penalties. Each rule is written once, here, and each value is one `workers` setting; the
learner reads the results (`Reward.pref`, `Reward.omission_penalized`, component `rltr_plan`) and never
re-derives them (from the server's call records or from its own copy of a penalty).
"""

from __future__ import annotations

from slca.contracts import GroundTruth
from workers.scoring.execution import repeated_calls
from workers.scoring.extract import Observed
from workers.settings import WorkerSettings


def invalid_format(obs: Observed) -> bool:
    """Some `<tool_call>` block is not a JSON object (or array of them) naming an offered tool with object
    arguments: the complement of HierR's `format`, call by call (`ParsedCall.valid` is that test). An invented
    tool, non-object arguments, a missing name or unparseable JSON are all invalid format."""
    return any(not c.valid for c in obs.calls)


def omitted(obs: Observed, gt: GroundTruth | None) -> bool:
    """A needed call is missing: the task needs a tool and no VALID call exists (a JSON object naming an offered
    tool with object arguments).

    The guard's rule says 'no parseable call'; we read 'parseable' as valid: a call to an invented tool, or with
    arguments that are not an object, calls nothing the task could use, so it cannot buy the summary out of the guard
    (the summary of an episode that called nothing is written without any result to ground it)."""
    return bool(gt and gt.tool_needed) and not obs.valid_calls


def guarded_pref(score: float, obs: Observed, gt: GroundTruth | None, s: WorkerSettings) -> tuple[float, bool]:
    """r_pref after the omission guard: `no_call_penalty` overrides the judge's score (the summary channel only:
    r_exec keeps its own, low, score), and whether the guard fired."""
    if s.omission_guard and omitted(obs, gt):
        return s.no_call_penalty, True
    return score, False


def rltr_plan(completeness: float, obs: Observed, s: WorkerSettings) -> float:
    """RLTR's planner reward (arXiv 2508.19598): `rltr_format_penalty` (−1) for invalid format, else
    completeness − μ·repeated calls − λ·failed calls."""
    if invalid_format(obs):
        return s.rltr_format_penalty
    return completeness - s.rltr_repeat_penalty * repeated_calls(obs) - s.rltr_fail_penalty * obs.failed_calls
