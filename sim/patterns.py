"""Regular expressions from caller-supplied schemas (`pattern`, `patternProperties`), with bounded cost.

Three costs are bounded:
- compiling: a pattern longer than `MAX_PATTERN_CHARS`, or whose fixed repetitions unroll past `MAX_UNROLLED`
  elements (`a{100000000}`, `(a{1000}){1000}`), is refused by `pattern_problem` before anything compiles it
  (the `regex` engine unrolls fixed repetitions: such a pattern would take gigabytes);
- matching: `search` runs the `regex` engine with a timeout (catastrophic backtracking such as `^(a+)+$` on
  "aaaa…!" stops there) and with the GIL released. Python's `re` cannot be interrupted and holds the GIL
  throughout, so it never matches a caller's pattern; without `regex` installed, only patterns without nested
  or alternated repetition (the shapes that backtrack catastrophically) are matched, with `re`;
- generating: `generate` walks the parsed pattern with a bounded output and gives up (None) on what it does not
  model (look-arounds, conditionals) or what would be too long; its result is always checked with `search`.
"""

from __future__ import annotations

import random
import re
import string
from functools import lru_cache
from re import _constants as sre  # the parse tree of `re` (stable across 3.11+; sre_parse is its public alias)
from re import _parser as sre_parse

from sim.bounds import SchemaLimitError, pattern_timeout, remaining

try:
    import regex as _regex
except ImportError:  # pragma: no cover - regex comes with transformers
    _regex = None

MAX_PATTERN_CHARS = 1000
"""Longest pattern accepted."""
MAX_UNROLLED = 10_000
"""Most pattern elements once fixed repetitions are unrolled (what the `regex` engine compiles)."""

_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
_POOL = string.ascii_lowercase + string.digits + string.ascii_uppercase + "-_. "


@lru_cache(maxsize=2048)  # keys are ≤ MAX_PATTERN_CHARS + a short message: ≈ 4 MiB at most
def pattern_problem(pattern: str) -> str | None:
    """Why SGLS will not use `pattern` (too long, too large once unrolled, not a regex), or None."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"pattern longer than {MAX_PATTERN_CHARS} characters"
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"pattern {pattern[:60]!r} is not a valid regular expression: {exc}"
    if _unrolled(parsed) > MAX_UNROLLED:
        return f"pattern {pattern[:60]!r} repeats more than {MAX_UNROLLED} elements"
    if _regex is None and _backtracks(parsed):
        return f"pattern {pattern[:60]!r} nests repetitions (and no timeout-capable regex engine is installed)"
    return None


def pattern_size(pattern: str) -> int:
    """Elements of `pattern` with fixed repetitions unrolled (more than MAX_UNROLLED when refused)."""
    if pattern_problem(pattern):
        return MAX_UNROLLED + 1
    return _unrolled(sre_parse.parse(pattern))


def _unrolled(items, limit: int = MAX_UNROLLED) -> int:
    """Elements of the pattern with each repetition counted `min` times (stops counting past `limit`)."""
    total = 0
    for op, av in items:
        if op in _REPEATS:
            low, _high, sub = av
            total += max(low, 1) * _unrolled(sub, limit)
        else:
            total += 1 + sum(_unrolled(sub, limit) for sub in _children(op, av))
        if total > limit:
            return total
    return total


def _children(op, av) -> list:
    if op is sre.SUBPATTERN:
        return [av[3]]
    if op is sre.BRANCH:
        return list(av[1])
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return [av[1]]
    if op is sre.ATOMIC_GROUP:
        return [av]
    if op is sre.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    if op in _REPEATS:
        return [av[2]]
    return []


def _backtracks(items, under_repeat: bool = False) -> bool:
    """A repetition inside a repetition, or a repeated alternation: the shapes of catastrophic backtracking."""
    for op, av in items:
        if op in _REPEATS:
            if under_repeat or av[1] == sre.MAXREPEAT and any(o is sre.BRANCH for o, _ in av[2]):
                return True
            if _backtracks(av[2], True):
                return True
        elif any(_backtracks(sub, under_repeat) for sub in _children(op, av)):
            return True
    return False


@lru_cache(maxsize=256)  # each compiled pattern is bounded by MAX_UNROLLED elements
def _compiled(pattern: str):
    if _regex is not None:
        return _regex.compile(pattern)
    return re.compile(pattern)


def search(pattern: str, text: str, timeout_s: float | None = None) -> bool:
    """`re.search(pattern, text)` semantics, bounded: raises SchemaLimitError when the pattern is refused or the
    match runs past `timeout_s` (default: the context's, `sim.bounds.within`) or past the current deadline."""
    if problem := pattern_problem(pattern):
        raise SchemaLimitError(problem)
    budget = min(pattern_timeout() if timeout_s is None else timeout_s, remaining())
    if budget <= 0:
        raise SchemaLimitError(f"no time left to match pattern {pattern[:60]!r}")
    compiled = _compiled(pattern)
    if _regex is None:
        return compiled.search(text) is not None
    try:
        return compiled.search(text, timeout=budget, concurrent=True) is not None
    except TimeoutError:
        raise SchemaLimitError(f"pattern {pattern[:60]!r} took longer than {budget:.3f}s to match") from None


def generate(pattern: str, rng: random.Random, max_len: int) -> str | None:
    """A string that `pattern` matches (search semantics), at most `max_len` characters, or None."""
    if pattern_problem(pattern):
        return None
    out = _Generator(rng, max_len)
    try:
        out.emit(sre_parse.parse(pattern))
    except _GiveUp:
        return None
    text = "".join(out.parts)
    try:
        return text if search(pattern, text) else None
    except SchemaLimitError:
        return None


class _GiveUp(Exception):
    pass


class _Generator:
    """Walks a parse tree, appending one possible match; repetitions take their minimum plus up to 3."""

    def __init__(self, rng: random.Random, max_len: int):
        self.rng = rng
        self.max_len = max_len
        self.parts: list[str] = []
        self.size = 0
        self.groups: dict[int, str] = {}

    def add(self, text: str) -> None:
        self.size += len(text)
        if self.size > self.max_len:
            raise _GiveUp
        self.parts.append(text)

    def emit(self, items) -> None:
        for op, av in items:
            if op is sre.LITERAL:
                self.add(chr(av))
            elif op is sre.NOT_LITERAL:
                self.add(next(c for c in _POOL if ord(c) != av))
            elif op is sre.ANY:
                self.add(self.rng.choice(string.ascii_lowercase))
            elif op is sre.IN:
                self.add(self._one_of(av))
            elif op in _REPEATS:
                low, high, sub = av
                high = low + 3 if high == sre.MAXREPEAT else high
                for _ in range(self.rng.randint(low, min(high, low + 3))):
                    self.emit(sub)
            elif op is sre.SUBPATTERN:
                start = len(self.parts)
                self.emit(av[3])
                if av[0] is not None:
                    self.groups[av[0]] = "".join(self.parts[start:])
            elif op is sre.BRANCH:
                self.emit(self.rng.choice(av[1]))
            elif op is sre.ATOMIC_GROUP:
                self.emit(av)
            elif op is sre.GROUPREF:
                self.add(self.groups.get(av, ""))
            elif op is sre.AT:
                continue  # anchors and word boundaries: the final check decides
            else:  # look-arounds, conditionals: not modelled
                raise _GiveUp

    def _one_of(self, items) -> str:
        if items and items[0][0] is sre.NEGATE:
            rest = items[1:]
            choices = [c for c in _POOL if not _in_class(rest, c)]
            if not choices:
                raise _GiveUp
            return self.rng.choice(choices)
        op, av = self.rng.choice(items)
        if op is sre.LITERAL:
            return chr(av)
        if op is sre.RANGE:
            return chr(self.rng.randint(av[0], av[1]))
        choices = [c for c in _POOL if _in_class([(op, av)], c)]
        if not choices:
            raise _GiveUp
        return self.rng.choice(choices)


_CATEGORIES = {
    sre.CATEGORY_DIGIT: str.isdigit,
    sre.CATEGORY_NOT_DIGIT: lambda c: not c.isdigit(),
    sre.CATEGORY_SPACE: str.isspace,
    sre.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    sre.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}


def _in_class(items, ch: str) -> bool:
    for op, av in items:
        if op is sre.LITERAL and ord(ch) == av:
            return True
        if op is sre.RANGE and av[0] <= ord(ch) <= av[1]:
            return True
        if op is sre.CATEGORY and _CATEGORIES.get(av, lambda c: False)(ch):
            return True
    return False
