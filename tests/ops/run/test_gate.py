"""The promotion gate (ops/run/gate/): its set is disjoint from every split, its rule holds a damaged candidate and
promotes a better one, the promoted version's outcomes are judged once, and every decision is recorded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ops.experiments.eval.suite import ItemRecord
from ops.run.gate.rule import decide, held_regression, promotion_threshold
from ops.run.gate.runner import Gate, gate_items
from ops.settings import GateSettings
from sim.tasks import load_tasks
from sim.tasks.gate import gate_tasks
from sim.tasks.generate import gold_signature


def _ops(**settings) -> GateSettings:
    """No budget (`ops.gate_budget_share` 0): these tests judge a due candidate at once."""
    return GateSettings(gate_budget_share=0, **settings)


def test_the_gate_set_is_disjoint_from_every_split_and_fixed():
    gate = gate_tasks("everyday", 96)
    pool = load_tasks("everyday", "all") + load_tasks("everyday", "novel")
    assert len(gate) == 96 and [t.task_id for t in gate] == [t.task_id for t in gate_tasks("everyday", 96)]
    assert not {t.task_id for t in gate} & {t.task_id for t in pool}
    assert not {t.messages[0]["content"] for t in gate} & {t.messages[0]["content"] for t in pool}
    signatures = {gold_signature(t.ground_truth.calls) for t in pool if t.ground_truth.calls}
    assert not {gold_signature(t.ground_truth.calls) for t in gate if t.ground_truth.calls} & signatures
    assert len({t.intent.split(":")[0] for t in gate}) >= 10  # stratified over intents


def records(successes: list[bool], version: int) -> list[ItemRecord]:
    return [ItemRecord("gate", f"i{k}", s, 0.0, 0.0, policy_version=version) for k, s in enumerate(successes)]


def test_the_rule_holds_a_regression_and_promotes_a_non_inferior_or_better_candidate():
    good = [k % 10 < 8 for k in range(100)]  # 0.8
    damaged = [k % 10 < 3 for k in range(100)]  # 0.3
    better = [True] * 100
    assert decide(records(good, 1), records(damaged, 2), 0.05).outcome == "hold"
    assert decide(records(good, 1), records(better, 2), 0.05).outcome == "promote"
    assert decide(records(good, 1), records(good, 2), 0.05).outcome == "promote"  # identical: interval [0, 0]
    assert decide(records(good, 1), records(good, 2), 0.05, require_better=True).outcome == "hold"
    # the power the default set leaves (README): 96 items, a fifth of them changing outcome between versions
    assert 0.07 < promotion_threshold(96, 0.2, 0.05) < 0.08 and -0.02 < held_regression(96, 0.2, 0.05) < -0.01


class FakeServe:
    """serve's versions and the decisions it was sent; a decision to promote moves the promoted version."""

    def __init__(self, candidate: int) -> None:
        self.state = {"candidate": candidate, "promoted": 0, "record": {"rolled_back": []}}
        self.sent: list[dict] = []
        self.holds: list = []

    async def versions(self) -> dict:
        return dict(self.state)

    async def hold(self, seconds: float) -> int:
        self.holds.append(self.state["candidate"])
        return self.state["candidate"]

    async def release(self) -> None:
        self.holds.append("released")

    async def send(self, body: dict) -> tuple[int, dict]:
        self.sent.append(body)
        decision = body["decision"]
        if decision["outcome"] == "promote":
            self.state["promoted"] = decision["candidate"]
        return 200, {}


def test_a_damaged_candidate_is_held_a_better_one_promoted_and_every_decision_recorded(tmp_path, redis_client):
    import redis.asyncio as aioredis

    ops = _ops(gate_every_versions=2, gate_items=20)
    items = gate_items("everyday", 20)
    quality = {0: 0.6, 2: 0.1, 4: 1.0}  # v2 damaged (weights noised: success drops), v4 better
    calls: list[int] = []

    async def evaluate(version, its):
        calls.append(version)
        return [
            ItemRecord("gate", it.item_id, k < quality[version] * len(its), 0.0, 0.0, policy_version=version)
            for k, it in enumerate(its)
        ]

    serve = FakeServe(candidate=2)
    url = redis_client.connection_pool.connection_kwargs

    async def main():
        client = aioredis.Redis(host=url["host"], port=url["port"])
        try:
            gate = Gate(ops, items, evaluate, serve, tmp_path, client, "gatetest")
            first = await gate.step()
            again = await gate.step()  # v2 already judged: not due again
            serve.state["candidate"] = 4
            second = await gate.step()
            return first, again, second
        finally:
            await client.aclose()

    first, again, second = asyncio.run(main())
    assert first.outcome == "hold" and first.diff < 0 and first.ci_low <= -0.05 and again is None
    assert second.outcome == "promote" and second.promoted == 0 and serve.state["promoted"] == 4
    assert calls == [0, 2, 4]  # the promoted version's outcomes judged once, then read from the cache
    lines = [json.loads(x) for x in (tmp_path / "gate" / "decisions.jsonl").read_text().splitlines()]
    assert [d["outcome"] for d in lines] == ["hold", "promote"] and lines[0]["n"] == 20
    assert (tmp_path / "gate" / "items" / "v2.jsonl").is_file()
    assert redis_client.llen("gatetest:gate:decisions") == 2
    assert [b["decision"]["candidate"] for b in serve.sent] == [2, 4]


def test_a_rolled_back_candidate_is_never_due():
    gate = Gate(_ops(gate_every_versions=1), [], None, None, Path("/nonexistent"))
    versions = {"candidate": 5, "promoted": 3, "record": {"rolled_back": [5]}}
    assert not gate.due(versions)
    assert gate.due({**versions, "record": {"rolled_back": []}})


def test_a_stop_leaves_a_judging_in_flight_at_once_and_records_nothing(tmp_path):
    started = asyncio.Event()

    async def evaluate(version, its):
        started.set()
        await asyncio.sleep(3600)  # a gate set on a slow machine

    async def main():
        gate = Gate(_ops(gate_every_versions=1), gate_items("everyday", 4), evaluate, FakeServe(2), tmp_path)
        stop = asyncio.Event()
        running = asyncio.create_task(gate.run(stop))
        await asyncio.wait_for(started.wait(), 10)
        stop.set()
        await asyncio.wait_for(running, 2)  # not the hour the judging would take

    asyncio.run(main())
    assert not (tmp_path / "gate").exists()


def test_with_a_candidate_replica_the_candidate_is_judged_there_and_the_decision_goes_to_serve(tmp_path):
    """`ops.candidate_replica`: the candidate comes from `serve-candidate`'s /v1/versions and is judged there; the
    promoted version, the record and the decision are serve's (the promoted replica)."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from ops.run.gate.runner import ServeAdmin

    sent, judged = [], []

    def replica(versions: dict) -> web.Application:
        async def read(request):
            return web.json_response(versions)

        async def promote(request):
            sent.append((versions["role"], await request.json()))
            return web.json_response({})

        app = web.Application()
        app.router.add_get("/v1/versions", read)
        app.router.add_post("/admin/promote", promote)
        return app

    def evaluator(where: str):
        async def evaluate(version, its):
            judged.append((where, version))
            return [ItemRecord("gate", it.item_id, True, 0.0, 0.0, policy_version=version) for it in its]

        return evaluate

    async def main():
        promoted = {"role": "promoted", "promoted": 1, "candidate": 1, "record": {"rolled_back": []}}
        follower = {"role": "candidate", "promoted": 1, "candidate": 3}
        async with TestServer(replica(promoted)) as serve, TestServer(replica(follower)) as candidate:
            admin = ServeAdmin(str(serve.make_url("/")), "token", str(candidate.make_url("/")))
            merged = await admin.versions()
            ops, items = _ops(gate_every_versions=1, gate_items=8), gate_items("everyday", 8)
            gate = Gate(
                ops, items, evaluator("serve"), admin, tmp_path, evaluate_candidate=evaluator("serve-candidate")
            )
            return merged, await gate.step()

    merged, decision = asyncio.run(main())
    assert (merged["promoted"], merged["candidate"], merged["role"]) == (1, 3, "promoted")
    assert judged == [("serve", 1), ("serve-candidate", 3)]
    assert (decision.outcome, decision.candidate, decision.promoted) == ("promote", 3, 1)
    assert [(role, body["decision"]["candidate"]) for role, body in sent] == [("promoted", 3)]


def test_the_candidate_is_held_while_judged_and_a_newer_one_held_is_the_one_judged(tmp_path):
    """The look read v2; by the hold the candidate's engine serves v3: v3 is judged (pinned runs of v2 would be
    refused by a one-engine serve that moved past it), the promoted version's runs come before the hold, and the
    hold is released after."""
    judged: list = []
    serve = FakeServe(candidate=2)

    async def evaluate(version, its):
        judged.append((version, list(serve.holds)))
        return [ItemRecord("gate", it.item_id, True, 0.0, 0.0, policy_version=version) for it in its]

    async def main():
        gate = Gate(_ops(gate_every_versions=1, gate_items=8), gate_items("everyday", 8), evaluate, serve,
                    tmp_path)  # fmt: skip
        real_hold = serve.hold

        async def moved_on(seconds):
            serve.state["candidate"] = 3
            return await real_hold(seconds)

        serve.hold = moved_on
        return await gate.step()

    decision = asyncio.run(main())
    assert judged == [(0, []), (3, [3])]  # promoted first, unheld; then the candidate, held at v3
    assert serve.holds == [3, "released"]
    assert (decision.candidate, decision.items_file) == (3, "items/v3.jsonl")
    assert serve.sent[0]["decision"]["candidate"] == 3


def _async_client(redis_client):
    import redis.asyncio as aioredis

    kwargs = redis_client.connection_pool.connection_kwargs
    return aioredis.Redis(host=kwargs["host"], port=kwargs["port"])


FEED_HOLD = "gatetest:gate:feed-hold"


def test_the_gate_holds_the_feed_while_it_judges_and_releases_it_after(tmp_path, redis_client):
    """`<prefix>:gate:feed-hold` is set (with an expiry of at most `ops.gate_hold_s`) while the promoted version's
    runs and the candidate's run, and deleted once the decision is had."""
    seen: list = []

    async def evaluate(version, its):
        seen.append((version, redis_client.exists(FEED_HOLD), redis_client.pttl(FEED_HOLD)))
        return [ItemRecord("gate", it.item_id, True, 0.0, 0.0, policy_version=version) for it in its]

    async def main():
        client = _async_client(redis_client)
        try:
            ops = _ops(gate_every_versions=1, gate_items=8, gate_hold_s=300)
            gate = Gate(ops, gate_items("everyday", 8), evaluate, FakeServe(2), tmp_path, client, "gatetest")
            return await gate.step()
        finally:
            await client.aclose()

    decision = asyncio.run(main())
    assert decision.outcome == "promote"
    assert [(v, held) for v, held, _ in seen] == [(0, 1), (2, 1)]
    assert all(0 < ttl <= 300_000 for _, _, ttl in seen)  # expires: a gate that dies never leaves the feed held
    assert not redis_client.exists(FEED_HOLD)


def test_the_feeds_hold_is_released_when_the_judging_fails_or_is_stopped(tmp_path, redis_client):
    started = asyncio.Event()

    async def failing(version, its):
        assert redis_client.exists(FEED_HOLD)
        if version == 2:  # the candidate's runs, the candidate's engine held
            raise RuntimeError("serve broke")
        return [ItemRecord("gate", it.item_id, True, 0.0, 0.0, policy_version=version) for it in its]

    async def hanging(version, its):
        started.set()
        await asyncio.sleep(3600)

    async def main():
        client = _async_client(redis_client)
        ops, items = _ops(gate_every_versions=1, gate_items=8), gate_items("everyday", 8)
        try:
            serve = FakeServe(2)
            with pytest.raises(RuntimeError, match="serve broke"):
                await Gate(ops, items, failing, serve, tmp_path / "a", client, "gatetest").step()
            after_failure = redis_client.exists(FEED_HOLD)
            stop = asyncio.Event()
            running = asyncio.create_task(Gate(ops, items, hanging, FakeServe(2), tmp_path / "b", client,
                                               "gatetest").run(stop))  # fmt: skip
            await asyncio.wait_for(started.wait(), 10)
            while_judging = redis_client.exists(FEED_HOLD)
            stop.set()
            await asyncio.wait_for(running, 5)
            return after_failure, while_judging, serve.holds
        finally:
            await client.aclose()

    after_failure, while_judging, holds = asyncio.run(main())
    assert after_failure == 0 and holds == [2, "released"]
    assert while_judging == 1 and not redis_client.exists(FEED_HOLD)


def test_with_gate_holds_feed_off_the_feed_is_never_held(tmp_path, redis_client):
    seen: list = []

    async def evaluate(version, its):
        seen.append(redis_client.exists(FEED_HOLD))
        return [ItemRecord("gate", it.item_id, True, 0.0, 0.0, policy_version=version) for it in its]

    async def main():
        client = _async_client(redis_client)
        try:
            ops = _ops(gate_every_versions=1, gate_items=8, gate_holds_feed=False)
            return await Gate(ops, gate_items("everyday", 8), evaluate, FakeServe(2), tmp_path, client,
                              "gatetest").step()  # fmt: skip
        finally:
            await client.aclose()

    assert asyncio.run(main()).outcome == "promote" and seen == [0, 0]


def test_a_due_decision_waits_for_the_budget_and_a_cached_promoted_version_halves_the_next(tmp_path):
    """`ops.gate_budget_share` 10%: the first decision evaluates two versions (the promoted one and the candidate),
    so it waits until it fits in a tenth of the serving time; the next evaluates only the candidate (the promoted
    version's records are the cached ones of the candidate promoted)."""
    now = [0.0]

    async def evaluate(version, its):
        now[0] += 2.0 * len(its)  # 2 s per item on the gate's clock
        return [ItemRecord("gate", it.item_id, True, 0.0, 0.0, policy_version=version) for it in its]

    ops = GateSettings(gate_every_versions=1, gate_items=8, gate_budget_share=0.10, gate_item_seconds=2.0)
    serve = FakeServe(2)
    gate = Gate(ops, gate_items("everyday", 8), evaluate, serve, tmp_path, clock=lambda: now[0])

    def look(at: float):
        now[0] = at
        return asyncio.run(gate.step())

    assert look(0.0) is None and look(300.0) is None  # 2 versions × 8 items × 2 s = 32 s > 10% of 300 s
    first = look(320.0)
    assert first is not None and first.outcome == "promote" and gate.spent_s == 32.0 and first.seconds == 32.0
    serve.state["candidate"] = 3
    assert gate.estimate_s(2) == 16.0  # v2 promoted: its records cached when it was the candidate
    assert look(470.0) is None  # 32 + 16 > 47
    second = look(480.0)
    assert second is not None and second.candidate == 3 and gate.spent_s == 48.0
    assert len(serve.sent) == 2  # nothing was sent while the decisions waited


def test_a_wait_for_the_budget_is_logged_once_not_once_per_candidate_published_meanwhile(tmp_path, caplog):
    now = [0.0]

    async def evaluate(version, its):
        now[0] += 2.0 * len(its)
        return [ItemRecord("gate", it.item_id, True, 0.0, 0.0, policy_version=version) for it in its]

    ops = GateSettings(gate_every_versions=1, gate_items=8, gate_budget_share=0.10, gate_item_seconds=2.0)
    serve = FakeServe(2)
    gate = Gate(ops, gate_items("everyday", 8), evaluate, serve, tmp_path, clock=lambda: now[0])
    caplog.set_level("INFO", logger="ops.run.gate.runner")
    for at, candidate in ((0.0, 2), (100.0, 3), (200.0, 4), (300.0, 5)):
        now[0], serve.state["candidate"] = at, candidate
        assert asyncio.run(gate.step()) is None
    assert sum("is due and waits" in r.getMessage() for r in caplog.records) == 1


def test_the_warm_starts_records_are_kept_across_runs_so_a_later_first_decision_judges_only_the_candidate(tmp_path):
    """Run 1 judges the warm start (its v1) and keeps its records by the model's content; run 2, serving the same
    warm start as v0, reads them at its first look: its first decision evaluates only the candidate, and the budget
    lets it go half as late. Other weights (a changed file) find nothing."""
    from ops.experiments.eval.suite import EvalPlan
    from ops.run.feed.baseline_cache import baseline_cache
    from ops.run.gate.warm_records import CACHE_FOLDER, WarmStartRecords

    items = gate_items("everyday", 8)
    plan = EvalPlan(splits=(), pack="everyday", bfcl_categories=(), concurrency=4)
    model = tmp_path / "warm"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"warm start")
    now, evaluated = [0.0], []

    async def evaluate(version, its):
        evaluated.append(version)
        now[0] += 2.0 * len(its)
        return [
            ItemRecord("gate", it.item_id, k % 2 == 0, 0.0, 0.0, policy_version=version) for k, it in enumerate(its)
        ]

    def run(data_dir: Path, warm_version: int, candidate: int) -> Gate:
        warm = WarmStartRecords(
            warm_version, lambda: baseline_cache(tmp_path / "cache", model, items, plan, CACHE_FOLDER)
        )
        ops = GateSettings(gate_every_versions=1, gate_items=8, gate_budget_share=0.10, gate_item_seconds=5.0)
        serve = FakeServe(candidate)
        serve.state["promoted"] = warm_version
        return Gate(ops, items, evaluate, serve, data_dir, clock=lambda: now[0], warm=warm)

    def look(gate: Gate, at: float):
        now[0] = at
        return asyncio.run(gate.step())

    first = run(tmp_path / "run1", 1, 3)
    assert look(first, 0.0) is None and look(first, 790.0) is None  # the setting's 5 s/item: 2 × 8 × 5 = 80 s
    assert look(first, 800.0) is not None
    assert evaluated == [1, 3]
    entries = [p for p in (tmp_path / "cache" / CACHE_FOLDER).glob("*.json") if p.name != "fingerprints.json"]
    assert len(entries) == 1  # the warm start's, not v3's

    evaluated.clear()
    second = run(tmp_path / "run2", 0, 2)
    assert look(second, 1000.0) is None  # the first look reads the cache: v0's records are this run's
    kept = (tmp_path / "run2" / "gate" / "items" / "v0.jsonl").read_text()
    assert '"policy_version": 0' in kept and '"policy_version": 1' not in kept
    assert second.item_s == 2.0 and second.estimate_s(0) == 16.0  # the cached run's pace, one version
    decision = look(second, 1160.0)  # 16 s ≤ 10% of 160 s: twice as early as two versions would allow
    assert decision is not None and evaluated == [2] and decision.promoted == 0 and decision.seconds == 16.0

    (model / "weights.bin").write_bytes(b"other weights")
    evaluated.clear()
    third = run(tmp_path / "run3", 0, 2)
    assert look(third, 2000.0) is None and third.estimate_s(0) == 80.0  # nothing read: both versions at 5 s/item
    assert not (tmp_path / "run3" / "gate" / "items" / "v0.jsonl").exists()
