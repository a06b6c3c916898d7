"""The execution (process) channel r_exec: the gold-call formula and the `exec_outcome` variant
(docs/design.md#hierr).

Interpretations written down (where the formula leaves room):
- A "block" for `format` is one `<tool_call>` block; it is well-formed when every call in it is valid
  (JSON object or array of objects, a name among the offered tools, object arguments). No block at all:
  format = 1 when no gold call is expected, else 0.
- `name` is over the calls that parsed into a JSON object with a name (`named_calls`), offered or not: an
  invented tool is a call the policy made and costs precision like an extra real call.
- `key` / `value` compare valid calls only (`workers.scoring.match`, no schema default filled in) and average
  over ALL gold calls: an unmatched gold call scores 0 on both. No gold calls: both are 1 only when no call was
  made at all (any `<tool_call>` block counts), else 0.
- "The first tool-call block" for `parallel` is the first model turn that wrote any call block: Hermes renders
  parallel calls as several blocks in one turn, so the turn is the step. Its calls must all be valid (any
  invalid call in it → 0: an invented tool cannot make up the count) and their names must be those of the gold
  calls of the lowest `step`, as many of each (a call to the wrong tool earns no parallel credit). No gold calls:
  1 when no call was made.
- `exec_outcome` = mean(outcome_valid, outcome_executed, outcome_complete): share of calls valid against the
  tool's JSON schema, share executed without error, and the task's completion check.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from slca.contracts import CallScore, GroundTruth
from workers.scoring.extract import Observed
from workers.scoring.match import CallMatch, canonical_json, match_calls, name_f1
from workers.scoring.reply import facts_present
from workers.settings import WorkerSettings


@dataclass
class ExecResult:
    value: float
    mode: str
    components: dict[str, float]
    per_call: list[CallScore] = field(default_factory=list)
    matches: list[CallMatch] = field(default_factory=list)


def format_share(obs: Observed, gold_expected: bool) -> float:
    blocks: dict[tuple[int, int], bool] = {}
    for turn in obs.turns:
        for call in turn.calls:
            key = (turn.turn, call.block)
            blocks[key] = blocks.get(key, True) and call.valid
    if not blocks:
        return 0.0 if gold_expected else 1.0
    return sum(blocks.values()) / len(blocks)


def named_calls(calls) -> list:
    """The calls the policy made: parsed into a JSON object with a name, offered or not, any arguments."""
    return [c for c in calls if c.name]


def parallel_match(obs: Observed, gt: GroundTruth) -> float:
    """1 when the first turn that called made exactly the first step's gold calls by name (the same multiset of
    names), all valid: the count alone paid for a valid call to the wrong tool."""
    if not gt.calls:
        return 0.0 if obs.calls else 1.0
    first = obs.turns[0].calls if obs.turns else []
    if not first or not all(c.valid for c in first):
        return 0.0
    first_step = min(c.step for c in gt.calls)
    expected = Counter(c.name for c in gt.calls if c.step == first_step)
    return 1.0 if Counter(c.name for c in first) == expected else 0.0


def _mean_over_gold(matches: list[CallMatch], part: str, obs: Observed) -> float:
    if not matches:  # no gold call: nothing to match, and nothing should have been called
        return 0.0 if obs.calls else 1.0
    return sum(getattr(m, part) if m.pred_index is not None else 0.0 for m in matches) / len(matches)


def exec_gold(obs: Observed, gt: GroundTruth, s: WorkerSettings) -> ExecResult:
    matches = gold_matches(obs, gt)
    comps = {
        "format": format_share(obs, bool(gt.calls)),
        "name": name_f1([c.name for c in gt.calls], [c.name for c in named_calls(obs.calls)]),
        "key": _mean_over_gold(matches, "key", obs),
        "value": _mean_over_gold(matches, "value", obs),
        "parallel": parallel_match(obs, gt),
    }
    value = (
        s.w_format * comps["format"]
        + s.w_name * comps["name"]
        + s.w_key * comps["key"]
        + s.w_value * comps["value"]
        + s.w_parallel * comps["parallel"]
    )
    return ExecResult(value, "gold", comps, _per_call_gold(obs, matches), matches)


def gold_matches(obs: Observed, gt: GroundTruth | None) -> list[CallMatch]:
    """The valid calls matched to the gold calls (`workers.scoring.match`); indices into `obs.valid_calls`."""
    return match_calls(gt.calls if gt else [], [(c.name, c.arguments) for c in obs.valid_calls], obs.schemas)


def _per_call_gold(obs: Observed, matches: list[CallMatch]) -> list[CallScore]:
    """Per call: invalid → 0; valid but matching no gold call (extra) → 0; matched → mean(1, key, value)."""
    by_pred = {m.pred_index: m for m in matches if m.pred_index is not None}
    out, valid_index = [], 0
    for turn in obs.turns:
        for call in turn.calls:
            score = 0.0
            if call.valid:
                m = by_pred.get(valid_index)
                score = (1.0 + m.key + m.value) / 3 if m else 0.0
                valid_index += 1
            out.append(CallScore(turn=turn.turn, score=score, name=call.name))
    return out


def _schema_valid(call, schemas: dict[str, dict]) -> bool:
    if not call.valid:
        return False
    try:
        jsonschema.validate(call.arguments, schemas.get(call.name) or {"type": "object"})
    except jsonschema.ValidationError:
        return False
    except jsonschema.SchemaError:
        return True  # the tool's schema is broken, not the call
    return True


def completion_holds(obs: Observed, gt: GroundTruth | None, executed_ok: int) -> bool:
    """`completion_check` keys: `required_tools` (each called validly) and/or the task's facts in the reply;
    without either, at least one call executed without error."""
    check: dict[str, Any] = (gt.completion_check if gt else None) or {}
    facts = gt.facts if gt else []
    required = check.get("required_tools") or []
    called = {c.name for c in obs.valid_calls}
    if required or facts:
        return all(r in called for r in required) and facts_present(obs.reply, facts) == 1.0
    return executed_ok > 0


def exec_outcome(obs: Observed, gt: GroundTruth | None) -> ExecResult:
    calls = obs.calls
    valid_flags = [_schema_valid(c, obs.schemas) for c in calls]
    executed_ok = max(0, len(calls) - obs.failed_calls) if calls else 0
    comps = {
        "outcome_valid": sum(valid_flags) / len(calls) if calls else 0.0,
        "outcome_executed": executed_ok / len(calls) if calls else 0.0,
        "outcome_complete": 1.0 if calls and completion_holds(obs, gt, executed_ok) else 0.0,
    }
    per_call, i = [], 0
    for turn in obs.turns:
        for call in turn.calls:
            per_call.append(CallScore(turn=turn.turn, score=float(valid_flags[i]), name=call.name))
            i += 1
    return ExecResult(sum(comps.values()) / 3, "outcome", comps, per_call)


def repeated_calls(obs: Observed) -> int:
    seen, repeats = set(), 0
    for c in obs.valid_calls:
        key = (c.name, canonical_json(c.arguments))
        repeats += key in seen
        seen.add(key)
    return repeats
