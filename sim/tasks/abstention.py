"""Abstention intents: requests that none of the offered tools can serve, offered 1–3 plausible tools.

The lesson (BFCL "irrelevance"): a tool list that looks related is no reason to call it; when nothing
offered can do what was asked, the right reply is plain text saying so, with no call. Two shapes:
- unsupported: a request no tool of the pack can serve, offered its near misses (a *forecast* with only
  `get_weather`, which gives current weather; an SMS with only `send_email`);
- removed: a request a pack intent does serve, with every tool that could serve it taken away, so only
  neighbours remain (the same words that mean "call convert_units" when it is offered mean "say you
  can't" when it is not).
Each task's intent is `<shape>:<what>` (the request's key, or the source intent), so a test can check
that no offered tool could have answered it; splits are drawn per shape.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sim.synth import seed_of
from sim.tasks.intents import Intent, Slots

UNSUPPORTED = "no_tool_unsupported"
REMOVED = "no_tool_removed"
OFFER_SIZES = (1, 1, 2, 2, 3)
"""Offered tools per abstention task: BFCL's irrelevance category mostly offers one function, some two or three."""
REPLIES = (
    "Sorry, I can't do that: none of the available tools ({tools}) can handle this request.",
    "I'm unable to help with that here. The tools I have ({tools}) don't support this request.",
    "None of the tools available to me ({tools}) can do this, so I can't complete that request.",
)


@dataclass(frozen=True)
class Unsupported:
    """A request no tool of the pack serves. `near` are tools that look related (offered first);
    `cannot_offer` are tools that could partly serve it after all (never offered)."""

    key: str
    phrasings: tuple[str, ...]
    near: tuple[str, ...] = ()
    cannot_offer: tuple[str, ...] = ()
    slots: Mapping[str, Sequence[str]] = field(default_factory=dict)


def abstain_reply(query: str, tools: Sequence[str]) -> str:
    """A short plain reply naming the offered tools (wording picked by the query, so a task's reply is fixed)."""
    names = list(tools)
    listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else (names[0] if names else "none")
    return REPLIES[seed_of(query) % len(REPLIES)].format(tools=listed)


def _answer(facts, results, query: str = "", tools: Sequence[str] = ()) -> str:
    return abstain_reply(query, tools)


def offer_without(rng: random.Random, pool: Sequence[str], banned: set[str], first: Sequence[str] = ()) -> list[str]:
    """1–3 tool names from `pool`, never a banned one: `first` (near misses) before random others."""
    size = rng.choice(OFFER_SIZES)
    near = [n for n in first if n in pool and n not in banned]
    rng.shuffle(near)
    others = [n for n in pool if n not in banned and n not in near]
    picked = near[:size] + rng.sample(others, min(len(others), max(0, size - len(near))))
    rng.shuffle(picked)
    return picked


def unsupported_intent(
    requests: Sequence[Unsupported], always_banned: set[str], per_task: int, name: str = UNSUPPORTED
) -> Intent:
    """Requests no tool of the pack serves, each offered its near misses (`always_banned` is never offered:
    e.g. a web search, which could look up almost anything). `name`: the intent's (the novel split has its own)."""
    by_key = {r.key: r for r in requests}
    if len(by_key) != len(requests):
        raise ValueError("unsupported requests need distinct keys")

    def sample(rng: random.Random) -> Slots:
        request = rng.choice(list(requests))
        slots = {name: rng.choice(list(values)) for name, values in sorted(request.slots.items())}
        return {"q": rng.choice(request.phrasings).format(**slots), "key": request.key}

    def offer(rng: random.Random, slots: Slots, pool: list[str]) -> list[str]:
        request = by_key[slots["key"]]
        return offer_without(rng, pool, always_banned | set(request.cannot_offer), request.near)

    return Intent(
        name,
        ["{q}"],
        sample,
        lambda s: [],
        lambda s, res: [],
        _answer,
        [],
        per_task,
        offer=offer,
        variant=lambda s: s["key"],
        refusal=True,
    )


def removed_intent(
    sources: Sequence[Intent],
    can_serve: Mapping[str, Sequence[str]],
    neighbours: Mapping[str, Sequence[str]],
    always_banned: set[str],
    per_task: int,
) -> Intent:
    """A source intent's request with every tool that could serve it withheld: its gold tools, the tools in
    `can_serve[source]` (a calculator can do a unit conversion) and `always_banned`. Offered: 1–3 of the
    source's `neighbours` first (same family, so they look related), then others."""
    by_name = {i.name: i for i in sources if i.tools}
    missing = sorted(set(by_name) - set(can_serve))
    if missing:
        raise ValueError(f"removed_intent: no can_serve entry for source intents {missing}")

    def sample(rng: random.Random) -> Slots:
        source = by_name[rng.choice(sorted(by_name))]
        return {"q": rng.choice(source.phrasings).format(**source.sample(rng)), "source": source.name}

    def offer(rng: random.Random, slots: Slots, pool: list[str]) -> list[str]:
        source = by_name[slots["source"]]
        banned = always_banned | set(source.tools) | set(can_serve[source.name])
        return offer_without(rng, pool, banned, neighbours.get(source.name, ()))

    return Intent(
        REMOVED,
        ["{q}"],
        sample,
        lambda s: [],
        lambda s, res: [],
        _answer,
        [],
        per_task,
        offer=offer,
        variant=lambda s: s["source"],
        refusal=True,
    )
