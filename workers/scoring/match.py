"""Comparing predicted calls with gold calls: loose value equality, name F1, best-match argument scores.

Definitions follow DESIGN.md §4 (after the SLCA-GRPO reference scorer):
- loose equality: trimmed case-insensitive strings; numbers within 1e-9; True / 1 / "true" (and False / 0 /
  "false") when either side is a boolean or a "true"/"false" string; canonical JSON for lists and dicts.
  Nothing else crosses types: the string "5" does not equal the number 5 (a wrong argument type is an error).
- name: multiset F1 of called names vs gold names (1 when both are empty).
- key / value: for each gold call, the best unused predicted call of the same name; key = Jaccard of the
  argument keys, value = share of gold keys whose values match loosely. Given the tools' parameter schemas,
  both sides are first completed with the declared `default`s: omitting an optional argument and passing
  its default are the same call.
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

    @property
    def correct(self) -> bool:
        """Matched, and every gold argument's value matches."""
        return self.pred_index is not None and self.value == 1.0

    @property
    def covers_keys(self) -> bool:
        """Matched by a call that sets at least every gold argument key (the RLTR checker's coverage)."""
        return self.pred_index is not None and self.key_cover == 1.0

    key_cover: float = 0.0


def schema_defaults(parameters: Any) -> dict[str, Any]:
    """The `default` each top-level property of a parameters schema declares."""
    props = parameters.get("properties") if isinstance(parameters, dict) else None
    return {k: p["default"] for k, p in (props or {}).items() if isinstance(p, dict) and "default" in p}


def match_calls(gold: list[GoldCall], preds: list[tuple[str, dict]],
                schemas: dict[str, Any] | None = None) -> list[CallMatch]:  # fmt: skip
    """Greedy best match, gold calls with more arguments first (they are the most constrained).
    `schemas` (tool name → parameters schema): arguments left out count as their declared defaults."""
    used: set[int] = set()
    matches = []
    for g in sorted(gold, key=lambda c: -len(c.arguments)):
        best, best_score = None, (-1.0, -1.0)
        defaults = schema_defaults((schemas or {}).get(g.name))
        gold_args = {**defaults, **g.arguments}
        for i, (name, args) in enumerate(preds):
            if i in used or name != g.name:
                continue
            args = {**defaults, **args}
            score = (key_jaccard(gold_args, args), value_share(gold_args, args))
            if sum(score) > sum(best_score):
                best, best_score = i, score
        if best is None:
            matches.append(CallMatch(g, None))
            continue
        used.add(best)
        args = {**defaults, **preds[best][1]}
        cover = sum(1 for k in gold_args if k in args) / len(gold_args) if gold_args else 1.0
        matches.append(CallMatch(g, best, best_score[0], best_score[1], cover))
    return matches
