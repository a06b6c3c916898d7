"""The task generator: intents × sampled slots → tasks with executed gold calls, facts and offered tools.

One pool and split per pack (`POOL_SEED`), whatever a run's seed: `train`/`test` are the same intents split per
intent; `novel` (everyday only) is intents and tools of their own that train and test never offer."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sim.real import RealPack, RealTool, ToolError
from sim.real.everyday import everyday_pack
from sim.real.tau2 import EpisodeDatabase, tau2_pack
from sim.tasks.catalog import NOVEL_SIMULATED_TOOLS, SIMULATED_TOOLS
from sim.tasks.everyday import everyday_intents
from sim.tasks.everyday_novel import NOVEL_TOOLS, novel_intents
from sim.tasks.intents import Intent
from sim.tasks.tau2 import airline_intents, retail_intents
from sim.synth import seed_of
from sim.backends.base import SimRequest, schema_answer
from sim.schemas import canonical_json, tool_spec
from slca.contracts import GroundTruth, Task

TEST_SHARE = 0.22
"""Per intent, this share of the train/test tasks is test (≥ 100 everyday test tasks, every intent in both)."""
MAX_TOOLS = 6
MIN_TOOLS = 3
POOL_SEED = 0
"""The one seed of every pool and split: a training run's seed never changes which tasks are held out (seed 1's
training pool must not hold seed 0's test tasks)."""


@dataclass
class PackSource:
    intents: Callable[[], list[Intent]]
    real: Callable[[], RealPack]
    state: Callable[[], Any]
    simulated: list[dict[str, Any]]
    novel: Callable[[], list[Intent]] | None = None
    """Intents of the held-out `novel` split (None: the pack has none)."""
    novel_tools: frozenset[str] = frozenset()
    """Tools (real or simulated) only novel tasks offer: never a train or test task, not even as a distractor."""


PACK_SOURCES: dict[str, PackSource] = {
    "everyday": PackSource(
        everyday_intents,
        everyday_pack,
        lambda: None,
        [*SIMULATED_TOOLS, *NOVEL_SIMULATED_TOOLS],
        novel_intents,
        NOVEL_TOOLS,
    ),
    "airline": PackSource(airline_intents, lambda: tau2_pack("airline"), lambda: EpisodeDatabase("airline"), []),
    "retail": PackSource(retail_intents, lambda: tau2_pack("retail"), lambda: EpisodeDatabase("retail"), []),
}


def run_sync(coro):
    """Run a coroutine to completion from sync code, even when called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class GoldFailed(Exception):
    """A sampled gold call that the real tool rejects: the draft is dropped and redrawn."""


async def _execute(defs: dict[str, dict[str, Any]], real: dict[str, RealTool], state: Any, calls) -> list[Any]:
    results = []
    for call in calls:
        if call.name in real:
            try:
                results.append(await real[call.name].fn(dict(call.arguments), state))
            except ToolError as exc:
                raise GoldFailed(str(exc)) from None
        else:  # a simulated tool: the deterministic synthesiser (what the schema backend answers)
            results.append(schema_answer(SimRequest(tool_spec(defs[call.name]), dict(call.arguments))))
    return results


def _offer(rng: random.Random, gold: list[str], pool: list[str]) -> list[str]:
    size = max(len(set(gold)), rng.randint(MIN_TOOLS, MAX_TOOLS))
    distractors = [n for n in pool if n not in gold]
    offered = list(dict.fromkeys(gold)) + rng.sample(distractors, min(len(distractors), size - len(set(gold))))
    rng.shuffle(offered)
    return offered


def generate_pool(pack: str, seed: int = 0) -> tuple[Task, ...]:
    """Every task of a pack, splits assigned. `seed` is kept for callers and changes nothing: every run, whatever
    its training seed, gets the one pool and split drawn with `POOL_SEED`."""
    return _pool(pack)


@lru_cache(maxsize=4)
def _pool(pack: str) -> tuple[Task, ...]:
    """(cached: generation executes the gold calls)"""
    source = PACK_SOURCES[pack]
    real_pack = source.real()
    defs = {name: tool.definition("real") for name, tool in real_pack.tools.items()}
    defs.update({t["function"]["name"]: t for t in source.simulated})
    return tuple(run_sync(_generate(pack, source, real_pack, defs)))


def gold_signature(calls) -> str:
    """The gold calls as one text (step, name, canonical arguments): equal texts, identical gold calls."""
    return canonical_json(sorted([c.step, c.name, canonical_json(c.arguments)] for c in calls))


async def _generate(pack: str, source: PackSource, real_pack: RealPack, defs) -> list[Task]:
    """Train/test intents over the pool without novel tools, then the novel intents over every tool. No two tasks
    of the pool share a query, a request key or (non-empty) gold calls, so no split repeats another's request."""
    state, seen = source.state(), set()
    pool = sorted(n for n in defs if n not in source.novel_tools)
    tasks = _split(await _draw(pack, source.intents(), pool, real_pack, defs, state, seen))
    for task in await _draw(pack, source.novel() if source.novel else [], sorted(defs), real_pack, defs, state, seen):
        task.split = "novel"
        tasks.append(task)
    return tasks


async def _draw(
    pack: str,
    intents: list[Intent],
    pool: list[str],
    real_pack: RealPack,
    defs,
    state,
    seen: set,
    seed: int = POOL_SEED,
) -> list[Task]:
    """`intent.per_task` tasks per intent (fewer when draws keep meeting `seen`), each marking `seen`. `seed`: the
    pool's (`POOL_SEED`); another draws further tasks, such as the gate set (`sim.tasks.gate`)."""
    tasks: list[Task] = []
    for intent in intents:
        rng = random.Random(seed_of(f"{seed}:{pack}:{intent.name}"))
        made, tries = 0, 0
        while made < intent.per_task and tries < intent.per_task * 5:
            tries += 1
            slots = intent.sample(rng)
            query = rng.choice(intent.phrasings).format(**slots)
            calls = intent.calls(slots)
            marks = {("query", query), ("key", intent.key(slots) if intent.key else query)}
            marks |= {("calls", gold_signature(calls))} if calls else set()
            if marks & seen:
                continue
            try:
                results = await _execute(defs, real_pack.tools, state, calls)
            except GoldFailed:
                continue
            facts = intent.facts(slots, results)
            if calls and not facts and all(c.name in real_pack.tools for c in calls):
                continue  # e.g. a flight search with no result: nothing to state, draw again
            seen |= marks
            key = hashlib.sha256(f"{query}|{[c.model_dump() for c in calls]}".encode()).hexdigest()[:10]
            offered = intent.offer(rng, slots, pool) if intent.offer else _offer(rng, intent.tools, pool)
            name = f"{intent.name}:{intent.variant(slots)}" if intent.variant else intent.name
            tasks.append(
                Task(
                    task_id=f"{pack}-{intent.name}-{key}",
                    domain=pack,
                    messages=[{"role": "user", "content": query}],
                    tools=[defs[n] for n in offered],
                    intent=name,
                    ground_truth=GroundTruth(calls=calls, facts=facts, needs_tool=bool(calls), refusal=intent.refusal),
                )
            )
            made += 1
    return tasks


def base_intent(task: Task) -> str:
    """The name of the intent that produced a task (its `intent` without the `:variant`)."""
    return (task.intent or "").split(":", 1)[0]


def _split(tasks: list[Task]) -> list[Task]:
    """Per intent, a shuffle seeded by `POOL_SEED`; the first `TEST_SHARE` are test. Both splits cover every intent."""
    by_intent: dict[str, list[Task]] = {}
    for task in tasks:
        by_intent.setdefault(base_intent(task), []).append(task)
    out = []
    for name in sorted(by_intent):
        group = sorted(by_intent[name], key=lambda t: t.task_id)
        random.Random(seed_of(f"split:{POOL_SEED}:{name}")).shuffle(group)
        n_test = max(1, round(len(group) * TEST_SHARE))
        for i, task in enumerate(group):
            task.split = "test" if i < n_test else "train"
            out.append(task)
    return out


def intent_of(task: Task) -> Intent:
    """The intent that produced a task (for its answer template)."""
    source = PACK_SOURCES[task.domain]
    for intent in [*source.intents(), *(source.novel() if source.novel else [])]:
        if intent.name == base_intent(task):
            return intent
    raise KeyError(f"task {task.task_id}: unknown intent {task.intent!r} in pack {task.domain!r}")
