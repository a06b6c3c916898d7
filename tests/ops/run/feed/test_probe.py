"""The held-out probe: a round of the evaluation at the first served version and every `every_versions` after,
its per-item file written atomically and readable, its summary (Wilson intervals per suite, the paired difference
from v0 with its bootstrap interval and McNemar p) computed from the records, dropped when a server restart failed
too many requests, resumed from its files when the feed restarts mid-run. The evaluation itself is faked: it is
`ops.experiments.eval.suite.run_items`' job (tests/ops/experiments/eval)."""

import asyncio
import json
from dataclasses import replace

import pytest
from aiohttp import web

from ops.experiments.eval.stats import mcnemar_exact, wilson
from ops.experiments.eval.suite import EvalItem, EvalPlan, ItemRecord, read_jsonl
from ops.run.feed.probe import Prober, ProbePlan
from ops.observe.probe_rounds import ROUND_SCHEMA, ProbeRound, RoundFiles, summarise_round
from slca.redis_server import free_port

ITEMS = (
    [EvalItem("test", f"t{i}") for i in range(6)]
    + [EvalItem("novel", f"n{i}") for i in range(3)]
    + [EvalItem("bfcl:simple_python", f"b{i}") for i in range(3)]
)


def record(item: EvalItem, success: bool, version: int | None, error: str | None = None, turns=(0,)) -> ItemRecord:
    bfcl = item.suite.startswith("bfcl:")
    calls = [{"name": "f", "arguments": {}, "valid": True, **({} if bfcl else {"turn": t})} for t in turns]
    return ItemRecord(
        item.suite,
        item.item_id,
        success=success,
        exec=None if bfcl else float(success),
        pref=None if bfcl else 0.5,
        calls=calls,
        policy_version=version,
        error=error,
    )


class FakeEval:
    """The evaluation as the probe sees it: items → records; item i succeeds from version `solved_from[i]` on. A
    pinned round is answered by the pinned version, whatever is served (as serve does: `X-SLCA-Pin-Version`)."""

    def __init__(self, solved_from: list[int], failing: int = 0):
        self.solved_from = solved_from
        self.failing = failing
        self.version = 0
        self.calls = 0
        self.pins: list[int | None] = []

    async def __call__(self, items: list[EvalItem], pin: int | None = None) -> list[ItemRecord]:
        self.calls += 1
        self.pins.append(pin)
        version = self.version if pin is None else pin
        return [
            record(
                item,
                version >= self.solved_from[i],
                version,
                error="HTTP 503: restarting" if i < self.failing else None,
            )
            for i, item in enumerate(items)
        ]


async def serve_routes(routes: dict) -> tuple[web.AppRunner, int]:
    """A real HTTP server on a free local port answering GET `routes` (path → handler); the caller cleans it up."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


def _prober(tmp_path, fake: FakeEval, published: list, every: int = 10) -> Prober:
    async def publish(entry: dict) -> None:
        published.append(entry)

    plan = ProbePlan(url="http://unused", eval=EvalPlan(), data_dir=tmp_path, every_versions=every)
    return Prober(plan, ITEMS, publish, run_items=fake)


def _drive(prober: Prober, fake: FakeEval, versions) -> None:
    async def main():
        for v in versions:
            fake.version = v
            await prober.step(v)

    asyncio.run(main())


def test_rounds_at_first_readiness_then_every_k_versions(tmp_path):
    fake, published = FakeEval([0, 0, 10, 10, 99, 99, 0, 30, 99, 0, 30, 99]), []
    _drive(_prober(tmp_path, fake, published), fake, [0, 3, 9, 10, 12, 25, 34, 40])
    assert [r["version"] for r in published] == [0, 10, 25, 40] and fake.calls == 4  # 40 ≥ 25 + 10; 34 is not
    assert RoundFiles(tmp_path).versions() == [0, 10, 25, 40]
    assert all(r["baseline_version"] == 0 and r["schema"] == ROUND_SCHEMA for r in published)
    # the held-out pool (9 tasks) rises 3/9 → 5/9 → 5/9 → 6/9; each round is paired with v0's own records
    assert [r["suites"]["held_out"]["success"] for r in published] == pytest.approx([3 / 9, 5 / 9, 5 / 9, 6 / 9])
    assert [r["vs_v0"]["held_out"]["diff"] for r in published] == pytest.approx([0, 2 / 9, 2 / 9, 3 / 9])
    assert [r["vs_v0"]["held_out"]["b_only"] for r in published] == [0, 2, 2, 3]


def test_the_baseline_is_pinned_to_its_version_and_never_holds_the_feed_a_periodic_round_does(tmp_path):
    """The learner's first step must not wait for the baseline (minutes of greedy items on 2 cores): the feed goes
    while it runs, and the pin keeps every item on the baseline's version however far the candidate moves."""
    seen = []

    class Watching(FakeEval):
        async def __call__(self, items, pin=None):
            seen.append(prober.feed_open.is_set())
            self.version += 2  # the learner publishes while the round runs
            return await super().__call__(items, pin)

    fake, published = Watching([0] * 12, failing=12), []  # every request fails: the round is dropped
    prober = _prober(tmp_path, fake, published)
    assert prober.feed_open.is_set()  # open from the start
    _drive(prober, fake, [0])
    assert prober.feed_open.is_set() and published == []  # dropped: the next poll asks again, the feed goes on
    fake.failing = 0
    _drive(prober, fake, [0, 10])
    assert seen == [True, True, False] and prober.feed_open.is_set()  # only the periodic round held it
    assert fake.pins == [0, 0, None] and [r["version"] for r in published] == [0, 12]  # a periodic one: as served
    assert published[0]["version_min"] == published[0]["version_max"] == 0  # v0 alone, though v2 was served
    seen.clear()
    prober = Prober(
        ProbePlan(url="http://unused", eval=EvalPlan(), data_dir=tmp_path / "b", holds_feed=False, every_versions=1),
        ITEMS,
        lambda e: asyncio.sleep(0),
        run_items=Watching([0] * 12),
    )
    asyncio.run(prober.step(0))
    asyncio.run(prober.step(1))
    assert seen == [True, True]  # holds_feed off: no round holds the feed


def test_on_a_one_engine_serve_the_baseline_holds_the_feed_until_it_is_had(tmp_path):
    """vLLM holds one engine per process: a pin of a version it moved past is a 409, so on a fresh clone every unheld
    baseline was dropped (the learner published during each). There the feed is held until the baseline is had, a
    dropped try keeps it held, and after `MAX_HELD_BASELINES` dropped tries the feed goes on."""
    from ops.run.feed.probe import MAX_HELD_BASELINES

    seen, published = [], []

    class Watching(FakeEval):
        async def __call__(self, items, pin=None):
            seen.append(prober.feed_open.is_set())
            return await super().__call__(items, pin)

    fake = Watching([0] * 12, failing=12)
    prober = _prober(tmp_path, fake, published)
    prober.one_engine = True
    _drive(prober, fake, [1])
    assert seen == [False] and not prober.feed_open.is_set() and published == []  # dropped: still held
    fake.failing = 0
    _drive(prober, fake, [1])
    assert seen == [False, False] and prober.feed_open.is_set() and [r["kind"] for r in published] == ["baseline"]
    # a serve that keeps failing: held for MAX_HELD_BASELINES tries, then the feed goes and the baseline is asked
    # again without holding it
    seen.clear()
    fake, published = Watching([0] * 12, failing=12), []
    prober = _prober(tmp_path / "b", fake, published)
    prober.one_engine = True
    _drive(prober, fake, [1] * (MAX_HELD_BASELINES + 1))
    assert seen == [False] * MAX_HELD_BASELINES + [True] and prober.feed_open.is_set()


def test_the_probe_reads_one_engine_from_v1_versions_and_never_leaves_the_feed_held(tmp_path):
    async def versions(request: web.Request) -> web.Response:
        return web.json_response({"promoted": 1, "candidate": 1, "one_engine": True})

    async def readyz(request: web.Request) -> web.Response:
        return web.json_response({"engine": True, "policy_version": 1})

    async def main():
        runner, port = await serve_routes({"/v1/versions": versions, "/readyz": readyz})
        stop, held = asyncio.Event(), []

        class Stopping(FakeEval):
            async def __call__(self, items, pin=None):
                held.append(not prober.feed_open.is_set())
                raise RuntimeError("the evaluation broke")  # the probe dies: the feed must not stay held

        plan = ProbePlan(url=f"http://127.0.0.1:{port}/", eval=EvalPlan(), data_dir=tmp_path, poll_s=0.01)
        prober = Prober(plan, ITEMS, lambda e: asyncio.sleep(0), run_items=Stopping([0] * 12))
        try:
            with pytest.raises(RuntimeError):
                await asyncio.wait_for(prober.run(stop), timeout=30)
        finally:
            await runner.cleanup()
        return prober, held

    prober, held = asyncio.run(main())
    assert prober.one_engine is True and held == [True] and prober.feed_open.is_set() and prober.feed_may_start.is_set()


def test_the_probes_requests_carry_the_pin(monkeypatch):
    from ops.run.feed import probe

    sent = []

    async def run_items(url, api_key, items, plan, headers=None):
        sent.append(headers)
        return []

    monkeypatch.setattr("ops.experiments.eval.suite.run_items", run_items)
    run = probe.suite_runner(ProbePlan(url="http://serve/", eval=EvalPlan(), data_dir=None))
    asyncio.run(run(ITEMS, 3))
    asyncio.run(run(ITEMS, None))
    assert sent == [{"X-SLCA-Pin-Version": "3"}, None]


def test_round_file_holds_every_item_and_reads_back(tmp_path):
    fake, published = FakeEval([0] * 12), []
    _drive(_prober(tmp_path, fake, published), fake, [7])
    path = tmp_path / published[0]["records"]
    assert published[0]["records"] == "probe/v7.jsonl" and path.is_file()
    back = read_jsonl(path)
    assert [(r.suite, r.item_id) for r in back] == [(i.suite, i.item_id) for i in ITEMS]
    assert all(r.success and r.policy_version == 7 for r in back)
    assert [p.name for p in path.parent.iterdir()] == ["v7.jsonl"]  # the temp file was renamed, not left behind


def test_round_with_too_many_failed_requests_is_dropped_and_retried(tmp_path):
    fake, published = FakeEval([0] * 12, failing=4), []  # 4 of 12 > a quarter
    prober = _prober(tmp_path, fake, published)
    _drive(prober, fake, [0])
    assert published == [] and RoundFiles(tmp_path).versions() == [] and prober.last_version is None
    fake.failing = 2  # the server is back (2 of 12 failed: kept, left out of the rates)
    _drive(prober, fake, [1])
    (r,) = published
    assert r["failed_requests"] == 2 and r["items"] == 12 and r["suites"]["held_out"]["n"] == 7


def test_summary_fields_and_paired_difference_from_two_rounds():
    v0 = [record(i, ok, 0) for i, ok in zip(ITEMS, [1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0])]
    # a swap lands mid-round (versions 40 and 41); one novel item lost, three test items gained; one request failed
    later = [
        record(i, ok, 40 if k < 5 else 41, turns=(0, 1) if k == 0 else (0,))
        for k, (i, ok) in enumerate(zip(ITEMS, [1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0]))
    ]
    later[5] = record(ITEMS[5], False, None, error="request failed: ClientConnectorError")
    first = summarise_round(v0, None, None, started_at=0.0, mode="greedy", fallback_version=0)
    r = summarise_round(later, v0, first.version, started_at=0.0, mode="greedy", fallback_version=40)
    assert (r.version, r.version_min, r.version_max) == (41, 40, 41)  # median_low of 5 × 40 and 6 × 41
    assert r.items == 12 and r.failed_requests == 1 and r.mode == "greedy" and r.baseline_version == 0
    held = r.suites["held_out"]  # 8 tasks ran (t5 failed): 5 solved
    assert held["n"] == 8 and held["success"] == pytest.approx(5 / 8)
    assert (held["ci_low"], held["ci_high"]) == pytest.approx(wilson(5, 8))
    assert held["tool_turns"] == pytest.approx(9 / 8) and held["pref"] == pytest.approx(0.5)
    assert r.suites["bfcl"]["n"] == 3 and r.suites["bfcl"]["exec"] is None and r.suites["bfcl"]["success"] == 2 / 3
    d = r.vs_v0["held_out"]  # paired over the 8 held-out items both rounds ran: 3 gained (t2, t3, t4), 1 lost (n0)
    assert (d["n"], d["b_only"], d["a_only"]) == (8, 3, 1) and d["diff"] == pytest.approx(2 / 8)
    assert d["ci_low"] <= d["diff"] <= d["ci_high"] and d["mcnemar_p"] == pytest.approx(mcnemar_exact(3, 1))
    assert r.vs_v0["test"]["diff"] == pytest.approx(3 / 5) and r.vs_v0["novel"]["diff"] == pytest.approx(-1 / 3)
    assert r.vs_v0["bfcl"]["diff"] == pytest.approx(1 / 3)
    assert first.vs_v0["held_out"]["diff"] == 0 and first.baseline_version == 0
    # the stream entry round-trips through JSON into the same record
    assert ProbeRound.from_json(json.loads(json.dumps(r.to_json()))) == r


@pytest.mark.parametrize(
    "entry", [{"version": 3, "exec_mean": 0.5, "success": 0.5}, ["a"], None, {"schema": ROUND_SCHEMA, "version": 3}]
)
def test_rounds_of_the_sampled_probe_or_malformed_ones_are_not_rounds(entry):
    assert ProbeRound.from_json(entry) is None


def test_a_restarted_feed_resumes_its_run_and_a_new_run_sets_old_files_aside(tmp_path):
    fake, published = FakeEval([0, 0, 0, 0, 0, 0, 0, 0, 0, 50, 50, 50]), []
    _drive(_prober(tmp_path, fake, published, every=30), fake, [0, 30])
    # the feed restarts at v45: v0 is still the baseline, the next round is due at 60
    again: list = []
    _drive(_prober(tmp_path, fake, again, every=30), fake, [45, 59, 60])
    assert [r["version"] for r in again] == [60] and again[0]["vs_v0"]["bfcl"]["diff"] == pytest.approx(1.0)
    # a new run (served v2 < the files' v60): its first round is its own v0, the old files moved aside
    fresh: list = []
    _drive(_prober(tmp_path, fake, fresh, every=30), fake, [2])
    assert [r["version"] for r in fresh] == [2] and fresh[0]["baseline_version"] == 2
    assert RoundFiles(tmp_path).versions() == [2]
    (old,) = [p for p in (tmp_path / "probe").iterdir() if p.is_dir()]
    assert sorted(p.name for p in old.iterdir()) == ["v0.jsonl", "v30.jsonl", "v60.jsonl"]


def test_run_polls_readiness_and_publishes_a_round(tmp_path):
    """The loop as `slca feed` runs it: /readyz gives the served version; the first round stops the test."""
    fake = FakeEval([0] * 12)

    async def readyz(request: web.Request) -> web.Response:
        return web.json_response({"engine": True, "policy_version": 4})

    async def main():
        runner, port = await serve_routes({"/readyz": readyz})
        stop, published = asyncio.Event(), []

        async def publish(entry):
            published.append(entry)
            stop.set()

        plan = ProbePlan(url=f"http://127.0.0.1:{port}/", eval=EvalPlan(), data_dir=tmp_path, poll_s=0.01)
        fake.version = 4
        try:
            await asyncio.wait_for(Prober(plan, ITEMS, publish, run_items=fake).run(stop), timeout=30)
        finally:
            await runner.cleanup()
        return published

    assert [r["version"] for r in asyncio.run(main())] == [4]


def test_probe_plan_from_settings():
    from ops.experiments.eval.probe_plan import probe_eval_plan
    from ops.settings import OpsSettings

    plan = probe_eval_plan(OpsSettings())
    assert plan.mode == "greedy" and plan.splits == ("test", "novel", "train_probe") and plan.bfcl_per_category == 8
    assert plan.concurrency == 8 and plan.bfcl_categories and plan.train_probe_size == 64  # every BFCL category
    off = probe_eval_plan(OpsSettings(probe_bfcl_per_category=0, probe_mode="sampled", probe_splits=["test"]))
    assert off.bfcl_categories == () and off.mode == "sampled" and off.splits == ("test",)


def test_slca_feed_wires_the_probe_from_its_settings(tmp_path):
    from types import SimpleNamespace

    from ops.run.feed.main import make_prober
    from slca.config import load_config

    feed = SimpleNamespace(url="http://127.0.0.1:1")
    sets = [f"common.data_dir={tmp_path}", "ops.probe_every_versions=7", "ops.probe_bfcl_per_category=2"]
    prober = make_prober(feed, load_config(None, sets))
    suites = {i.suite for i in prober.items}
    assert {"test", "novel", "train_probe"} <= suites and sum(i.suite.startswith("bfcl:") for i in prober.items) == 10
    assert sum(i.suite == "train_probe" for i in prober.items) == 64
    assert prober.plan.every_versions == 7 and prober.plan.data_dir == tmp_path and prober.plan.eval.mode == "greedy"
    # periodic rounds: the training-task probe alone, every 20 minutes, within 10% of the serving time
    assert {i.suite for i in prober.round_items} == {"train_probe"} and len(prober.round_items) == 64
    assert prober.plan.every_s == 1200 and prober.plan.budget_share == 0.10 and prober.plan.final_timeout_s == 900
    assert prober.cache_of is not None
    assert make_prober(feed, load_config(None, [*sets, "ops.probe_enabled=false"])) is None
    both = make_prober(feed, load_config(None, [*sets, 'ops.probe_round_suites=["test","bfcl"]']))
    assert {i.suite for i in both.round_items} == {"test", "bfcl:simple_python", "bfcl:multiple", "bfcl:parallel",
                                                   "bfcl:parallel_multiple", "bfcl:irrelevance"}  # fmt: skip


def test_a_held_baseline_is_cut_at_its_bound_with_the_rounds_items_first_and_the_feed_goes(tmp_path):
    """Unbounded, the held baseline of ≈ 350 items held the feed 2,419 s on a loaded avx2-only machine and the
    learner's first step waited that long (bench/soak/learning-30-trim). Bounded, it goes in chunks, the items
    periodic rounds ask again first; at the bound the feed goes and the answered items are the baseline."""
    now = [0.0]
    seen = []

    class Slow(FakeEval):
        async def __call__(self, items, pin=None):
            seen.append((prober.feed_open.is_set(), [i.item_id for i in items]))
            now[0] += 6.0  # a chunk takes 6 s
            return await super().__call__(items, pin)

    published = []

    async def publish(entry: dict) -> None:
        published.append(entry)

    fake = Slow([0] * 12)
    again = [i for i in ITEMS if i.suite == "novel"]
    plan = ProbePlan(
        url="http://unused", eval=EvalPlan(concurrency=1), data_dir=tmp_path, every_versions=1, baseline_hold_s=10
    )
    prober = Prober(plan, ITEMS, publish, run_items=fake, round_items=again, clock=lambda: now[0])
    prober.one_engine = True
    _drive(prober, fake, [0])
    # chunks of 4 (BASELINE_CHUNK_ROUNDS × concurrency 1): the novel items first; at 12 s ≥ 10 s the rest is not asked
    assert seen == [(False, ["n0", "n1", "n2", "t0"]), (False, ["t1", "t2", "t3", "t4"])]
    assert prober.feed_open.is_set() and fake.pins == [0, 0]
    assert published[0]["kind"] == "baseline" and published[0]["items"] == 8
    assert len(prober.baseline) == 8
    _drive(prober, fake, [1])  # a periodic round pairs with the cut baseline on every item it asks
    assert published[1]["vs_v0"]["novel"]["n"] == 3
    # unbounded (0), the baseline asks every item in one call
    fake, published[:] = Slow([0] * 12), []
    seen.clear()
    prober = Prober(replace(plan, baseline_hold_s=0, data_dir=tmp_path / "b"), ITEMS, publish, run_items=fake)
    prober.one_engine = True
    _drive(prober, fake, [0])
    assert len(seen) == 1 and published[0]["items"] == 12
