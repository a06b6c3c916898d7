"""The final reply's checks (docs/design.md#hierr: the rule judge, `success`, `exec_outcome`): facts stated, a
refusal where one is due and nowhere else, claims grounded in the tool results.

Text is compared after one normalisation (`normalize`): casefolded, curly apostrophes made straight, white space
collapsed, and every number written canonically ("1,250" → "1250", "12.50" → "12.5", "07" → "7"), so numbers
compare as numbers. A needle is found only on word and number boundaries: "7" is not in "2017" nor in "7.5", "cat"
is not in "category". A number may be followed by a letter ("5km" states 5).
"""

from __future__ import annotations

import json
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from slca.contracts import GroundTruth

NUMBER = re.compile(r"(?<![\d.])(?:(?<!\w)-)?\d+(?:,\d{3})*(?:\.\d+)?(?!\d)(?!\.\d)")
"""A number as written in text: optional sign (only after a non-word character: "COVID-19" states 19), thousands
commas, decimals; never part of a longer number ("2017", "7.5")."""


def _canonical(token: str) -> Decimal | None:
    try:
        return Decimal(token.replace(",", ""))
    except InvalidOperation:
        return None


def _number_text(d: Decimal) -> str:
    text = format(d.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def normalize(text: str) -> str:
    """Casefolded, straight apostrophes, single spaces, numbers canonical (see the module docstring)."""
    text = " ".join(str(text).replace("\u2019", "'").replace("\u2018", "'").casefold().split())

    def canon(m: re.Match) -> str:
        d = _canonical(m.group())
        return m.group() if d is None else _number_text(d)

    return NUMBER.sub(canon, text)


def numbers_in(text: str) -> list[Decimal]:
    return [d for d in (_canonical(m.group()) for m in NUMBER.finditer(str(text))) if d is not None]


def mentions(normalized_text: str, needle: str) -> bool:
    """`needle` (raw) occurs in already-normalised text on word and number boundaries."""
    n = normalize(needle)
    if not n:
        return False
    before = r"(?<!\w)(?<!\d\.)" if n[0].isalnum() else ""
    after = (r"(?!\d)(?!\.\d)(?!,\d)" if n[-1].isdigit() else r"(?!\w)") if n[-1].isalnum() else ""
    return re.search(before + re.escape(n) + after, normalized_text) is not None


def facts_present(reply: str, facts: list[str]) -> float:
    """Share of key facts stated in the reply, on word/number boundaries (1 when there are none)."""
    if not facts:
        return 1.0
    text = normalize(reply)
    return sum(1 for f in facts if mentions(text, str(f))) / len(facts)


_DECLINE = re.compile(
    r"\bi(?: can ?not|'m not able to|'m unable to| am not able to| am unable to|'m not able|"
    r" can't| cannot| am not able| do not have| don't have| have no)\b"
    r"|\bunable to\b|\bnot (?:something|a task) i can\b"
    r"|\bnone of (?:the|my)(?: \w+)? tools\b"
    r"|\bno (?:available |offered |suitable )?tools? (?:can|that|to|for|available)\b"
    r"|\bthere (?:is|are) no (?:\w+ )?tools?\b|\b(?:isn't|is not|aren't|are not) (?:supported|possible)\b"
    r"|\bdon't support\b|\bdoes not support\b|\bdoesn't support\b|\bdo not support\b"
)
"""Saying it cannot: first-person inability, or that no offered tool can do it."""

_CLAIM = re.compile(
    r"(?:^|[.!?]\s*)(?:all |it's |it is )?done\b|\ball set\b|\btaken care of\b|\bsuccessfully\b"
    r"|\bhere(?: is|'s| are)\b"
    r"|\bi(?: have|'ve)(?: now| just| already)? (?:booked|sent|created|scheduled|set|ordered|transferred|cancell?ed|"
    r"deleted|moved|played|turned|called|texted|paid|made|placed|reserved|added|updated|changed|completed|"
    r"started|bought|sold|purchased|rescheduled)\b"
    r"|\bi(?:'ll| will)(?: now| go ahead and)? (?:go ahead|book|send|create|schedule|set|order|transfer|cancel|"
    r"delete|move|play|turn|call|text|pay|buy|sell)\b"
)
"""Claiming the request was carried out ("Done!", "I have booked …", "Here is …")."""


def declines(reply: str) -> bool:
    return _DECLINE.search(normalize(reply)) is not None


def claims_success(reply: str) -> bool:
    return _CLAIM.search(normalize(reply)) is not None


def answers(reply: str, gt: GroundTruth | None) -> bool:
    """The reply does what the task asks of a final reply: states every key fact; on a refusal task
    (`GroundTruth.refusal`) it declines and claims nothing done; on any other task it does not decline."""
    if not reply.strip() or facts_present(reply, gt.facts if gt else []) < 1.0:
        return False
    if gt is not None and gt.refusal:
        return declines(reply) and not claims_success(reply)
    return not declines(reply)


def _leaves(value: Any, out: list[Any]) -> None:
    """Scalar values of non-error results (JSON text parsed); an `{"error": …}` object grounds nothing."""
    if isinstance(value, str):
        try:  # tool results often arrive as JSON text
            parsed = json.loads(value)
        except (json.JSONDecodeError, ValueError):
            parsed = None
        if isinstance(parsed, (dict, list)):
            _leaves(parsed, out)
        elif value.strip() and len(value) <= 200:
            out.append(value.strip())
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        out.append(value)
    elif isinstance(value, dict):
        if set(value) == {"error"}:
            return
        for v in value.values():
            _leaves(v, out)
    elif isinstance(value, list):
        for v in value:
            _leaves(v, out)


def result_values(results: list[Any]) -> list[Any]:
    out: list[Any] = []
    for r in results:
        _leaves(r, out)
    return out


def _rounds_to(k: Decimal, n: Decimal) -> bool:
    """`n` is `k`, or `k` rounded to as many decimals as `n` is written with ("3.11" from 3.106856)."""
    if k == n:
        return True
    places = max(0, -n.normalize().as_tuple().exponent) if n != 0 else 0
    try:
        return k.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP) == n
    except InvalidOperation:  # more digits than the context holds: not a rounding of n
        return False


def _number_values(values: list[Any]) -> list[Decimal]:
    out: list[Decimal] = []
    for v in values:
        out += [Decimal(repr(v))] if isinstance(v, (int, float)) else numbers_in(v)
    return [d for d in out if d.is_finite()]


def grounded(reply: str, results: list[Any], user_texts: list[str], vouched: list[str] = ()) -> bool:
    """The reply's claims come from the tool results:

    - every number it states is one the results hold (number values, or numbers inside string values), one the
      user's messages hold, or one in `vouched` (the task's key facts, passed only for a task that needs no tool:
      its answer is the model's own knowledge); a number written rounded counts ("3.11" for 3.106856), and signs
      are ignored (a hyphen and a minus sign look alike);
    - and when there are non-error results, it cites at least one of their values: a number among the results'
      (as above), or a string value on word boundaries (one-character strings are ignored, too common to show
      anything).
    With no non-error result the second rule cannot apply, and the first keeps a reply from inventing numbers
    the user never gave (after an error, or without calling)."""
    values = result_values(results)
    # magnitudes: in "UTC-03:00" or "2024-07-05" a hyphen reads like a minus sign, on either side
    from_results = [abs(d) for d in _number_values(values)]
    known = from_results + [abs(d) for d in _number_values([*user_texts, *vouched])]
    stated = [abs(d) for d in numbers_in(reply)]
    if not all(any(_rounds_to(k, n) for k in known) for n in stated):
        return False
    if not values:
        return True
    if any(_rounds_to(k, n) for n in stated for k in from_results):
        return True
    text = normalize(reply)
    return any(mentions(text, v) for v in values if isinstance(v, str) and len(v) >= 2)
