"""Intents: a kind of request with several phrasings, a slot sampler, gold calls and an answer template.

A task pack is a list of intents. The generator samples slots, renders one phrasing, executes the gold
calls against the real tools (so key facts are exact), and offers the gold tools plus distractors.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slca.contracts import GoldCall

Slots = dict[str, Any]
Results = list[Any]


@dataclass
class Intent:
    name: str
    phrasings: list[str]
    """`str.format` templates over the slots."""
    sample: Callable[[random.Random], Slots]
    calls: Callable[[Slots], list[GoldCall]]
    """Gold calls for the slots. A call's arguments may depend on earlier results: see `needs_results`."""
    facts: Callable[[Slots, Results], list[str]]
    answer: Callable[..., str]
    """`answer(facts, results[, query[, tools]])`: final answer text from the key facts (and the tool results,
    for simulated tools); intents without tools may also take the user's query and the offered tool names."""
    tools: list[str] = field(default_factory=list)
    """Offered tool names the gold calls use (the rest of the offer are distractors)."""
    per_task: int = 30
    """How many tasks the generator draws for this intent."""
    offer: Callable[[random.Random, Slots, list[str]], list[str]] | None = None
    """`offer(rng, slots, pool)`: the offered tool names, for intents whose offer is the lesson (abstention
    offers 1–3 near misses and never a tool that could serve). None: gold tools plus 3–6 in all."""
    variant: Callable[[Slots], str] | None = None
    """Sub-kind recorded as the task's intent `name:variant` (splits are still drawn per `name`)."""
    key: Callable[[Slots], str] | None = None
    """What makes two requests the same, for de-duplication across the pool (None: the query text). A
    knowledge question asked with another lead-in ("Hey, ...") is still the same question."""
    refusal: bool = False
    """Abstention: no offered tool can serve the request, the right reply declines (`GroundTruth.refusal`)."""


def one_call(name: str, **args) -> list[GoldCall]:
    """The gold of a one-call intent: `name(**args)` in step 0."""
    return [GoldCall(name=name, arguments=args, step=0)]


def parallel_calls(name: str, key: str, *values: Any) -> list[GoldCall]:
    """The gold of a parallel intent: `name(key=v)` once per value, all in step 0 (one model turn)."""
    return [GoldCall(name=name, arguments={key: v}, step=0) for v in values]


def lookup_intent(
    name: str,
    phrasings: list[str],
    slot: str,
    pool: list[Any],
    tool: str,
    arg: str,
    facts: Callable[[Any], list[str]],
    answer: Callable[[list[str], Any], str],
) -> Intent:
    """A one-call lookup: `slot` drawn from `pool`, the gold `tool(arg=slot)` in step 0, the key facts taken from its
    one result (`facts(result)`) and the answer from them and that result (`answer(facts, result)`)."""
    return Intent(
        name,
        phrasings,
        lambda r: {slot: r.choice(pool)},
        lambda s: one_call(tool, **{arg: s[slot]}),
        lambda s, res: facts(res[0]),
        lambda f, res: answer(f, res[0]),
        [tool],
    )


def fmt_number(value: Any) -> str:
    """A number as an answer would state it: integers plain, other floats with at most two decimals."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def summarise(result: Any) -> str:
    """Plain-language rendering of a simulated result's scalar fields (never raw JSON)."""
    if isinstance(result, dict):
        parts = [
            f"{k.replace('_', ' ')}: {fmt_number(v)}" for k, v in result.items() if not isinstance(v, (dict, list))
        ]
        lists = [k for k, v in result.items() if isinstance(v, list)]
        parts += [f"{len(result[k])} {k.replace('_', ' ')}" for k in lists]
        return "; ".join(parts) if parts else "the request went through"
    return str(result)
