"""Comparing predicted calls with gold calls: loose value equality, name F1, best-match argument scores.

Definitions (docs/design.md#hierr, after the SLCA-GRPO reference scorer):
- loose equality: trimmed case-insensitive strings; numbers within 1e-9; True / 1 / "true" (and False / 0 /
  "false") when either side is a boolean or a "true"/"false" string; canonical JSON for lists and dicts.
  Nothing else crosses types: the string "5" does not equal the number 5 (a wrong argument type is an error).
- name: multiset F1 of called names vs gold names (1 when both are empty).
- key / value: for each gold call, the best unused predicted call of the same name (most matching values first,
  then key overlap); key = Jaccard of the argument key sets (1 when both are empty), value = share of gold keys
  whose values match loosely (1 for a gold call without arguments). Arguments are compared as written: no schema
  default is filled in on either side, so leaving out or adding an argument always moves `key`.
- exactness (`CallMatch.correct`, `CallMatch.exact`, read by `success`, ToolPO's action and RLTR's completeness):
  a matched call is `correct` when every gold value is matched loosely, where an argument one side leaves out
  equals the tool schema's declared `default` on the other (passing the default explicitly is the same call);
  it is `exact` when, besides, it adds no argument of its own (`invented`: a key the gold call does not set,
  unless its value is that parameter's default).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from slca.contracts import GoldCall

_TRUE, _FALSE = "true", "false"
NUMBER_TOLERANCE = 1e-9


def _bool_token(v: Any) -> str | None:
    if isinstance(v, bool):
        return _TRUE if v else _FALSE
    if isinstance(v, (int, float)) and v in (0, 1):
        return _TRUE if v == 1 else _FALSE
    if isinstance(v, str) and v.strip().lower() in (_TRUE, _FALSE):
        return v.strip().lower()
    return None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _booleanish_side(v: Any) -> bool:
    return isinstance(v, bool) or (isinstance(v, str) and v.strip().lower() in (_TRUE, _FALSE))


def canonical_json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def loose_equal(gold: Any, pred: Any) -> bool:
    if _booleanish_side(gold) or _booleanish_side(pred):
        g, p = _bool_token(gold), _bool_token(pred)
        return g is not None and g == p
    if _is_number(gold) and _is_number(pred):
        return math.isfinite(gold) and math.isfinite(pred) and abs(gold - pred) <= NUMBER_TOLERANCE
    if isinstance(gold, str) and isinstance(pred, str):
        return gold.strip().casefold() == pred.strip().casefold()
    if isinstance(gold, (list, dict)) and isinstance(pred, (list, dict)):
        return canonical_json(gold) == canonical_json(pred)
    return gold is None and pred is None


def name_f1(gold: list[str], pred: list[str]) -> float:
    if not gold and not pred:
        return 1.0
    if not gold or not pred:
        return 0.0
    common = sum((Counter(gold) & Counter(pred)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def key_jaccard(gold_args: dict, pred_args: dict) -> float:
    g, p = set(gold_args), set(pred_args)
    return 1.0 if not g and not p else len(g & p) / len(g | p)


def value_share(gold_args: dict, pred_args: dict) -> float:
    if not gold_args:
        return 1.0
    hits = sum(1 for k, v in gold_args.items() if k in pred_args and loose_equal(v, pred_args[k]))
    return hits / len(gold_args)


@dataclass
class CallMatch:
    gold: GoldCall
    pred_index: int | None
    """Index into the list of valid predicted calls; None when no call of that name was left."""
    key: float = 0.0
    value: float = 0.0
    values_match: bool = False
    """Every gold value matched loosely, an omitted argument standing for its schema default (either side)."""
    invented: tuple[str, ...] = ()
    """Keys the predicted call sets that the gold call does not, with a value other than the schema default."""

    @property
    def correct(self) -> bool:
        """Matched, and every gold argument's value matches (defaults standing in for omitted arguments): the
        RLTR checker's coverage and ToolPO's correct call."""
        return self.pred_index is not None and self.values_match

    @property
    def exact(self) -> bool:
        """Correct, and no invented argument: the same call as the gold one (`success`)."""
        return self.correct and not self.invented


def schema_defaults(parameters: Any) -> dict[str, Any]:
    """The `default` each top-level property of a parameters schema declares."""
    props = parameters.get("properties") if isinstance(parameters, dict) else None
    return {k: p["default"] for k, p in (props or {}).items() if isinstance(p, dict) and "default" in p}


def _values_match(gold_args: dict, pred_args: dict, defaults: dict) -> bool:
    def same(k: str, g: Any) -> bool:
        if k in pred_args:
            return loose_equal(g, pred_args[k])
        return k in defaults and loose_equal(g, defaults[k])

    return all(same(k, g) for k, g in gold_args.items())


def _invented(gold_args: dict, pred_args: dict, defaults: dict) -> tuple[str, ...]:
    return tuple(
        sorted(
            k
            for k, v in pred_args.items()
            if k not in gold_args and not (k in defaults and loose_equal(defaults[k], v))
        )
    )


def match_calls(
    gold: list[GoldCall], preds: list[tuple[str, dict]], schemas: dict[str, Any] | None = None
) -> list[CallMatch]:
    """Greedy best match, gold calls with more arguments first (they are the most constrained); `preds` are the
    valid predicted calls (name, object arguments). `schemas` (tool name → parameters schema) only decide
    exactness (their defaults, see the module docstring); `key` and `value` never read them."""
    used: set[int] = set()
    matches = []
    for g in sorted(gold, key=lambda c: -len(c.arguments)):
        best, best_score = None, (-1.0, -1.0)
        for i, (name, args) in enumerate(preds):
            if i in used or name != g.name:
                continue
            score = (value_share(g.arguments, args), key_jaccard(g.arguments, args))
            if score > best_score:
                best, best_score = i, score
        if best is None:
            matches.append(CallMatch(g, None))
            continue
        used.add(best)
        args, defaults = preds[best][1], schema_defaults((schemas or {}).get(g.name))
        matches.append(
            CallMatch(
                g,
                best,
                key=best_score[1],
                value=best_score[0],
                values_match=_values_match(g.arguments, args, defaults),
                invented=_invented(g.arguments, args, defaults),
            )
        )
    return matches
