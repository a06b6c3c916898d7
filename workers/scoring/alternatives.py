"""Shotgun replies: a key fact offered as one of several candidates ("either 12 or 15 or 20 degrees"), so that one
of them is bound to be right. Such a reply does not state the fact; `workers.scoring.reply.answers` fails it.

Read on text already normalised (`workers.scoring.reply.normalize`). From each place the reply states a fact, the
check walks left and right over values of the fact's kind joined by links (",", "/", "or", "or maybe", …); when
the run holds an "or" or a "/" and some other value in it competes with the fact's, the fact is offered with
alternatives. Of the fact's kind means: for a number, another number (with up to three unit words after it); for
text, a run of words and digits shaped like the fact ("Oslo" → one word, "17:45" → digits:digits). Values do not
compete when one is the other rounded ("3.11, or about 3.1"), when two numbers carry different units ("15 °C or
59 °F"), or when the text is the same. A list joined only by commas ("15 degrees, 64 percent") offers no alternative,
and a range ("between 12 and 20") is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal

_HEDGES = "maybe|perhaps|possibly|probably|likely|even|about|around|roughly|approximately"
_LINK = rf"\s*(?:,\s*or\b|,|/|\bor\b)\s*(?:(?:{_HEDGES})\s+)?"
"""What joins two candidates: a comma, a slash or "or", with a hedge after it ("or maybe")."""
_NOT_A_VALUE = (
    r"(?!(?:or|and|either|so|not|else|other|another|something|anything|whatever|similar|thereabouts|more|less|"
    rf"rather|simply|just|{_HEDGES})\b)"
)
"""Words that follow a link without being a candidate ("15 or so", "Paris, or rather …")."""
_UNIT = rf"(?:\s*{_NOT_A_VALUE}(?:°\s*[^\W\d_]+|%|[^\W\d_]+)){{0,3}}"
"""Up to three unit words after a number ("degrees", "°c", "degrees in oslo")."""


@dataclass(frozen=True)
class Candidate:
    text: str
    """The value as written (normalised), without its unit."""
    unit: str


def offers_alternatives(text: str, fact: str, places: Callable[[str], Iterator[re.Match]], number: re.Pattern) -> bool:
    """Some place where `text` (normalised) states `fact` (normalised) offers it with a competing alternative.
    `places(text)` finds the matches stating the fact; `number` is the reply's number pattern."""
    value = _value_pattern(fact, number)
    unit = _UNIT if number.fullmatch(fact) else ""
    for place in places(text):
        stated = Candidate(place.group(), _unit_at(text, place.end(), unit))
        after = _walk_right(text, place.end() + len(stated.unit), value, unit)
        before = _walk_left(text[: place.start()], value, unit)
        links, others = [*before[0], *after[0]], [*before[1], *after[1]]
        if any(_disjunctive(link) for link in links) and any(_competes(stated, o, number) for o in others):
            return True
    return False


def _value_pattern(fact: str, number: re.Pattern) -> str:
    """A value of the fact's kind: any number for a number; for text, the fact's shape (letters → a word, digits → a
    number, anything else as written)."""
    if number.fullmatch(fact):
        return rf"(?<![^\W\d_])(?:{number.pattern})"  # a number glued to letters ("HAT279") is a name
    parts = re.findall(r"[^\W\d_]+|\d+|\s+|.", fact)
    shape = "".join(
        rf"{_NOT_A_VALUE}[^\W\d_]+"
        if p[0].isalpha()
        else r"\d+"
        if p[0].isdigit()
        else r"\s+"
        if p.isspace()
        else re.escape(p)
        for p in parts
    )
    return rf"(?<![\w.]){shape}(?![\w])"


def _unit_at(text: str, pos: int, unit: str) -> str:
    return re.match(unit, text[pos:]).group() if unit else ""


def _walk_right(text: str, pos: int, value: str, unit: str) -> tuple[list[str], list[Candidate]]:
    links, found = [], []
    step = re.compile(rf"({_LINK})({value})({unit})")
    while m := step.match(text, pos):
        links.append(m.group(1))
        found.append(Candidate(m.group(2), m.group(3)))
        pos = m.end()
    return links, found


def _walk_left(text: str, value: str, unit: str) -> tuple[list[str], list[Candidate]]:
    links, found = [], []
    step = re.compile(rf"({value})({unit})({_LINK})\Z")
    while m := step.search(text):
        links.append(m.group(3))
        found.append(Candidate(m.group(1), m.group(2)))
        text = text[: m.start()]
    return links, found


def _disjunctive(link: str) -> bool:
    """A link that offers a choice ("or", "/"), not one that lists ("," alone)."""
    return "/" in link or re.search(r"\bor\b", link) is not None


def _competes(stated: Candidate, other: Candidate, number: re.Pattern) -> bool:
    if number.fullmatch(stated.text) and number.fullmatch(other.text):
        a, b = Decimal(stated.text), Decimal(other.text)
        if _rounded_from(a, b) or _rounded_from(b, a):
            return False  # one value, written twice at two precisions
        return not (stated.unit.strip() and other.unit.strip() and stated.unit.strip() != other.unit.strip())
    return stated.text != other.text


def _rounded_from(exact: Decimal, rounded: Decimal) -> bool:
    """`rounded` is `exact` rounded (half either way) to as many decimals as `rounded` is written with."""
    places = max(0, -rounded.as_tuple().exponent)
    return abs(exact - rounded) <= Decimal(5).scaleb(-places - 1)
