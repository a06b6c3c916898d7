"""The task generator: intents × sampled slots → tasks with executed gold calls, facts and offered tools."""

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
from sim.tasks.catalog import SIMULATED_TOOLS
from sim.tasks.everyday import everyday_intents
from sim.tasks.intents import Intent
from sim.tasks.tau2 import airline_intents, retail_intents
from sim.synth import seed_of
from sim.backends.base import SimRequest, schema_answer
from sim.schemas import tool_spec
from slca.contracts import GroundTruth, Task

TEST_SHARE = 0.2
MAX_TOOLS = 6
MIN_TOOLS = 3


@dataclass
class PackSource:
    intents: Callable[[], list[Intent]]
    real: Callable[[], RealPack]
    state: Callable[[], Any]
    simulated: list[dict[str, Any]]


PACK_SOURCES: dict[str, PackSource] = {
    "everyday": PackSource(everyday_intents, everyday_pack, lambda: None, SIMULATED_TOOLS),
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


@lru_cache(maxsize=8)
def generate_pool(pack: str, seed: int) -> tuple[Task, ...]:
    """Every task of a pack for a seed, splits assigned (cached: generation executes the gold calls)."""
    source = PACK_SOURCES[pack]
    real_pack = source.real()
    defs = {name: tool.definition("real") for name, tool in real_pack.tools.items()}
    defs.update({t["function"]["name"]: t for t in source.simulated})
    tasks = run_sync(_generate(pack, seed, source, real_pack, defs))
    return tuple(_split(tasks, seed))


async def _generate(pack: str, seed: int, source: PackSource, real_pack: RealPack, defs) -> list[Task]:
    state = source.state()
    tasks: dict[str, Task] = {}
    for intent in source.intents():
        rng = random.Random(seed_of(f"{seed}:{pack}:{intent.name}"))
        made, tries = 0, 0
        while made < intent.per_task and tries < intent.per_task * 5:
            tries += 1
            slots = intent.sample(rng)
            query = rng.choice(intent.phrasings).format(**slots)
            calls = intent.calls(slots)
            try:
                results = await _execute(defs, real_pack.tools, state, calls)
            except GoldFailed:
                continue
            facts = intent.facts(slots, results)
            if calls and not facts and all(c.name in real_pack.tools for c in calls):
                continue  # e.g. a flight search with no result: nothing to state, draw again
            key = hashlib.sha256(f"{query}|{[c.model_dump() for c in calls]}".encode()).hexdigest()[:10]
            task_id = f"{pack}-{intent.name}-{key}"
            if task_id in tasks:
                continue
            pool = sorted(defs)
            offered = intent.offer(rng, slots, pool) if intent.offer else _offer(rng, intent.tools, pool)
            name = f"{intent.name}:{intent.variant(slots)}" if intent.variant else intent.name
            tasks[task_id] = Task(
                task_id=task_id, domain=pack, messages=[{"role": "user", "content": query}],
                tools=[defs[n] for n in offered], intent=name,
                ground_truth=GroundTruth(calls=calls, facts=facts, needs_tool=bool(calls)),
            )  # fmt: skip
            made += 1
    return list(tasks.values())


def base_intent(task: Task) -> str:
    """The name of the intent that produced a task (its `intent` without the `:variant`)."""
    return (task.intent or "").split(":", 1)[0]


def _split(tasks: list[Task], seed: int) -> list[Task]:
    """Per intent, a seeded shuffle; the first 20% are test. Both splits cover every intent."""
    by_intent: dict[str, list[Task]] = {}
    for task in tasks:
        by_intent.setdefault(base_intent(task), []).append(task)
    out = []
    for name in sorted(by_intent):
        group = sorted(by_intent[name], key=lambda t: t.task_id)
        random.Random(seed_of(f"split:{seed}:{name}")).shuffle(group)
        n_test = max(1, round(len(group) * TEST_SHARE))
        for i, task in enumerate(group):
            task.split = "test" if i < n_test else "train"
            out.append(task)
    return out


def intent_of(task: Task) -> Intent:
    """The intent that produced a task (for its answer template)."""
    for intent in PACK_SOURCES[task.domain].intents():
        if intent.name == base_intent(task):
            return intent
    raise KeyError(f"task {task.task_id}: unknown intent {task.intent!r} in pack {task.domain!r}")
