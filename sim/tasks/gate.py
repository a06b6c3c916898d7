"""The promotion gate's set: held-out tasks no split of the pool holds (docs/design.md#versions).

The gate judges every candidate on these items before callers may get it, so they must be kept apart from what
the reports and benchmarks use (the `test` and `novel` splits) and from what the learner trains on (`train`):
otherwise promotions would be chosen on the very items that later judge them. They are drawn from the pack's
train/test intents with the gate's own seed (`GATE_SEED`), after the whole pool has marked every query, request key
and gold call it holds — the generator skips any draw that repeats one — so no gate task repeats a task of any split
(`tests/ops/run/test_gate.py` checks it). Then `n` of them are picked stratified over intents, in a fixed order.
A gate task's `split` field is meaningless (the contract knows three splits); its suite in the records is `gate`.
"""

from __future__ import annotations

from functools import lru_cache

from sim.tasks.probe import stratified
from slca.contracts import Task

GATE_SEED = 37
"""The gate set's draw (not the pool's `POOL_SEED`, not the training probe's): changing it changes every decision's
items, and the cached outcomes of the promoted version with them."""

DEFAULT_GATE_SIZE = 96


def gate_tasks(pack: str = "everyday", n: int = DEFAULT_GATE_SIZE) -> list[Task]:
    """`n` tasks (fewer if the draw has fewer) disjoint from every split of `pack`, stratified over intents."""
    if n < 1:
        raise ValueError(f"gate set size must be >= 1, got {n}")
    return [t.model_copy(deep=True) for t in stratified(_drawn(pack), n, GATE_SEED)]


@lru_cache(maxsize=2)
def _drawn(pack: str) -> tuple[Task, ...]:
    from sim.tasks.generate import PACK_SOURCES, _draw, run_sync

    source = PACK_SOURCES[pack]
    real_pack = source.real()
    defs = {name: tool.definition("real") for name, tool in real_pack.tools.items()}
    defs.update({t["function"]["name"]: t for t in source.simulated})

    async def draw() -> list[Task]:
        state, seen = source.state(), set()
        pool = sorted(n for n in defs if n not in source.novel_tools)
        # the pool's own draws first (the same calls as `generate_pool`): they mark everything a split holds
        await _draw(pack, source.intents(), pool, real_pack, defs, state, seen)
        if source.novel:
            await _draw(pack, source.novel(), sorted(defs), real_pack, defs, state, seen)
        return await _draw(pack, source.intents(), pool, real_pack, defs, state, seen, seed=GATE_SEED)

    return tuple(run_sync(draw()))
