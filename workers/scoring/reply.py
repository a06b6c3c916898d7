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
from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import partial
from typing import Any

from slca.contracts import GroundTruth
from workers.scoring import alternatives

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


def _needle_pattern(n: str) -> str:
    """A normalised needle on word and number boundaries."""
    before = r"(?<!\w)(?<!\d\.)" if n[0].isalnum() else ""
    after = (r"(?!\d)(?!\.\d)(?!,\d)" if n[-1].isdigit() else r"(?!\w)") if n[-1].isalnum() else ""
    return before + re.escape(n) + after


def mentions(normalized_text: str, needle: str) -> bool:
    """`needle` (raw) occurs in already-normalised text on word and number boundaries."""
    n = normalize(needle)
    return bool(n) and re.search(_needle_pattern(n), normalized_text) is not None


FACT_DECIMALS = 2
"""Facts state numbers with at most two decimals, trailing zeros dropped (`sim.tasks.intents.fmt_number`: the tool's
8.04672 is the fact "8.05", 7.0 is "7"), so a fact number stands for every value that rounds to it at two decimals
(or at its own precision, when finer)."""


def _fact_number(fact: str) -> Decimal | None:
    """The fact (normalised) as a number, when it is one number and nothing else."""
    return _canonical(fact) if NUMBER.fullmatch(fact) else None


def _rounds_to_fact(value: Decimal, fact: Decimal) -> bool:
    """`value` rounds to `fact` at the facts' precision, ties either way ("8.04672" states 8.05, "7.4" does not
    state 7)."""
    places = max(FACT_DECIMALS, -fact.as_tuple().exponent)
    return abs(value - fact) <= Decimal(5).scaleb(-places - 1)


def fact_places(text: str, fact: str) -> Iterator[re.Match]:
    """Where already-normalised `text` states `fact` (raw): the fact on word/number boundaries, and for a number
    fact also every more precise number that rounds to it (`_rounds_to_fact`)."""
    n = normalize(fact)
    if not n:
        return
    yield from re.finditer(_needle_pattern(n), text)
    number = _fact_number(n)
    if number is not None:
        yield from (m for m in NUMBER.finditer(text) if _finer_rounding(text, m, number))


def _finer_rounding(text: str, m: re.Match, fact: Decimal) -> bool:
    """The number at `m` is written with more decimals than `fact` and rounds to it; a number glued to a word
    ("HAT279") is a name, not a value."""
    value = _canonical(m.group())
    glued = m.start() > 0 and text[m.start() - 1].isalpha()
    finer = value is not None and value.as_tuple().exponent < fact.as_tuple().exponent
    return finer and not glued and _rounds_to_fact(value, fact)


def facts_present(reply: str, facts: list[str]) -> float:
    """Share of key facts stated in the reply (`fact_places`; 1 when there are none)."""
    if not facts:
        return 1.0
    text = normalize(reply)
    return sum(1 for f in facts if next(fact_places(text, str(f)), None) is not None) / len(facts)


def offers_alternatives(reply: str, facts: list[str]) -> bool:
    """Some key fact is offered as one of several competing candidates (`workers.scoring.alternatives`)."""
    text = normalize(reply)
    return any(
        alternatives.offers_alternatives(text, normalize(str(f)), partial(fact_places, fact=str(f)), NUMBER)
        for f in facts
    )


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

_DID = (
    r"booked|sent|created|scheduled|set|ordered|transferred|cancell?ed|deleted|moved|played|turned|called|texted|"
    r"paid|made|placed|reserved|added|updated|changed|completed|started|bought|sold|purchased|rescheduled|arranged|"
    r"handled|sorted|organi[sz]ed|confirmed|submitted|processed|contacted|emailed|messaged|notified|forwarded|"
    r"finished|taken care|took care"
)
"""What a first-person claim says it did ("I have booked …", "I booked …")."""
_DONE = (
    r"arranged|booked|done|sent|scheduled|sorted|handled|organi[sz]ed|confirmed|completed|reserved|ordered|"
    r"submitted|processed|cancell?ed|rescheduled|transferred|taken care of"
)
"""Completion states ("it's all arranged"): only the words of finished errands, which a statement of fact ("Mars is
called the Red Planet") does not use."""
_BEEN_DONE = r"started|played|added|updated|changed|moved|paid|purchased|bought|sold|deleted|created|placed|set up"
"""More errands, claimed done only in the perfect ("your playlist has been started")."""
_ACTION_CLAIM = re.compile(
    r"^(?:all |it's |it is |that's |that is |everything's |everything is )?done\b|\ball (?:set|done|arranged|booked|"
    r"sorted)\b|\btaken care of\b|\bsuccessfully\b|\bconsider it done\b"
    rf"|\bi(?: have|'ve)?(?: now| just| already| successfully)? (?:{_DID})\b"
    rf"|(?:'s|'re|\bis|\bare|\bhas been|\bhave been|'s been|'ve been)(?: all| now| already| just| successfully)* "
    rf"(?:{_DONE})\b"
    rf"|(?:\bhas been|\bhave been|'s been|'ve been)(?: now| already| just| successfully)* (?:{_BEEN_DONE})\b"
    r"|\bi(?:'ll| will)(?: now| go ahead and)? (?:go ahead|book|send|create|schedule|set|order|transfer|cancel|"
    r"delete|move|play|turn|call|text|pay|buy|sell|arrange)\b"
)
"""Claiming, in one clause, that the request was (or is being) carried out: "Done!", "I have booked …", "it's all
arranged", "I'll send it"."""
_OFFER = re.compile(r"\bhere(?: is|'s| are)\b")
"""Handing over a result ("Here is …"): on a refusal task, the thing it said it could not do."""
_CLAUSE_BREAK = re.compile(r"[.!?;:,()]|\s[-\u2013\u2014]\s|\b(?:but|however|so|and|although|though|yet|while)\b")
_NEGATION = re.compile(r"\b(?:not|no|nothing|never|none|cannot|unable)\b|n't\b")
"""A clause with a negation claims nothing ("so nothing has been booked", "it has not been arranged")."""


def _clauses(reply: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_BREAK.split(normalize(reply)) if c.strip()]


def _claims(pattern: re.Pattern, reply: str) -> bool:
    return any(pattern.search(c) and not _NEGATION.search(c) for c in _clauses(reply))


def declines(reply: str) -> bool:
    return _DECLINE.search(normalize(reply)) is not None


def claims_action(reply: str) -> bool:
    """Some clause says the request was carried out, without a negation in it."""
    return _claims(_ACTION_CLAIM, reply)


def claims_success(reply: str) -> bool:
    """Claims the request carried out, or hands over its result ("here is …")."""
    return claims_action(reply) or _claims(_OFFER, reply)


def has_content(reply: str) -> bool:
    """At least one letter or digit: "?!" says nothing."""
    return re.search(r"[^\W_]", reply) is not None


def answers(reply: str, gt: GroundTruth | None, acted: bool) -> bool:
    """The reply does what the task asks of a final reply: it has content and states every key fact, none of them
    among competing alternatives; on a refusal task (`GroundTruth.refusal`) it declines and claims nothing done; on
    any other task it does not decline, and claims an action only when a tool call ran (`acted`): a claim with no
    call behind it is hollow."""
    facts = gt.facts if gt else []
    if not has_content(reply) or facts_present(reply, facts) < 1.0 or offers_alternatives(reply, facts):
        return False
    if gt is not None and gt.refusal:
        return declines(reply) and not claims_success(reply)
    if claims_action(reply) and not acted:
        return False
    return not declines(reply)


def _leaves(value: Any, out: list[Any]) -> None:
    """Scalar values of non-error results (JSON text parsed), and the length of each non-empty list; an
    `{"error": …}` object grounds nothing."""
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
        if value:  # "I found 4 direct flights": how many a list holds is one of its values (an empty one: none)
            out.append(len(value))
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

    - every number it states is one the results hold (number values, numbers inside string values, or how many
      items a list holds), one the user's messages hold, or one in `vouched` (the task's key facts, passed only for
      a task that needs no tool: its answer is the model's own knowledge); a number written rounded counts ("3.11"
      for 3.106856), and signs are ignored (a hyphen and a minus sign look alike);
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
