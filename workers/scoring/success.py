"""`success` (0/1), the headline component: the task was done, exactly, and the final reply says so.

With gold calls: every gold call is matched by one valid call of the same name that is `exact`
(`workers.scoring.match`: every gold value matched loosely, no invented argument, an argument left out standing
for its schema `default` and one passed as its default being no invention: passing the default explicitly is the
same call); no invented call (no call to a non-offered tool, no more valid calls than gold calls); no invalid call
block of any kind. Without gold calls, on a task that needs no tool (chat, knowledge, abstention): no call at all.
`exec_outcome` tasks (a tool is needed, no gold calls): every outcome check holds. And always, every check of the
final reply holds (`workers.scoring.checks`: grounded, answers, no raw JSON, sensible length), whatever judge rates
`r_pref`: `answers` alone let a raw JSON dump or an invented number through.
"""

from __future__ import annotations

from slca.contracts import GroundTruth
from workers.scoring.execution import ExecResult
from workers.scoring.extract import Observed
from workers.scoring.shaping import invalid_format


def task_success(obs: Observed, gt: GroundTruth | None, ex: ExecResult, reply_holds: bool) -> bool:
    """`reply_holds`: every reply check holds (`workers.scoring.checks.all_hold`)."""
    if not reply_holds:
        return False
    if ex.mode == "outcome":
        return ex.value == 1.0 and not invalid_format(obs)
    gold = gt.calls if gt else []
    if not gold:
        return not obs.calls
    return len(obs.valid_calls) == len(gold) and not invalid_format(obs) and all(m.exact for m in ex.matches)
