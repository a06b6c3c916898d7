"""The probe's schedule and cost: the baseline (v0 alone, pinned) asked again until it is had; the warm start's baseline
cached on disk and read back by a later run instead of asked again; periodic rounds by time on the training-task
probe, put off while they would take the probe past its share of the serving time; a final round on the last served
version at the stop, bounded in time. The evaluation is faked (tests/ops/run/feed/test_probe.py)."""

import asyncio
import json

import pytest

from ops.experiments.eval.suite import EvalItem, EvalPlan
from ops.observe.probe_rounds import RoundFiles
from ops.run.feed.baseline_cache import BaselineCache, cache_key, model_fingerprint
from ops.run.feed.probe import Prober, ProbePlan
from tests.ops.run.feed.test_probe import FakeEval

FULL = (
    [EvalItem("test", f"t{i}") for i in range(4)]
    + [EvalItem("train_probe", f"p{i}") for i in range(4)]
    + [EvalItem("bfcl:simple_python", f"b{i}") for i in range(2)]
)
PERIODIC = [i for i in FULL if i.suite == "train_probe"]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TimedEval(FakeEval):
    """Each item takes `item_s` seconds of the fake clock."""

    def __init__(self, clock: Clock, item_s: float = 2.0):
        super().__init__([0, 0, 5, 99, 0, 5, 5, 99, 0, 0])
        self.clock, self.item_s, self.asked = clock, item_s, []

    async def __call__(self, items, pin=None):
        self.asked.append(len(items))
        self.clock.now += self.item_s * len(items)
        return [
            r
            for r in await super().__call__(FULL, pin)
            if (r.suite, r.item_id) in {(i.suite, i.item_id) for i in items}
        ]


def prober(tmp_path, fake, published, clock, cache=None, **plan) -> Prober:
    async def publish(entry):
        published.append(entry)

    defaults = {"every_s": 600.0, "budget_share": 0.10, "item_seconds": 2.0}
    p = ProbePlan(url="http://unused", eval=EvalPlan(), data_dir=tmp_path, **{**defaults, **plan})
    return Prober(p, FULL, publish, run_items=fake, round_items=PERIODIC, cache=cache, clock=clock)


def drive(pr: Prober, fake: FakeEval, clock: Clock, steps):
    """steps: (served version, seconds of serving before the poll)."""

    async def main():
        for version, wait in steps:
            clock.now += wait
            fake.version = version
            await pr.step(version)

    asyncio.run(main())


def test_periodic_rounds_by_time_on_the_training_probe_within_the_budget(tmp_path):
    clock, published = Clock(), []
    fake = TimedEval(clock)
    pr = prober(tmp_path, fake, published, clock)
    # baseline (10 items, 20 s), then polls: a round of 4 items (8 s) is due every 600 s once a new version is served
    drive(pr, fake, clock, [(0, 0), (0, 700), (3, 0), (4, 100), (5, 600)])
    assert fake.asked == [10, 4, 4] and [r["kind"] for r in published] == ["baseline", "periodic", "periodic"]
    assert [r["version"] for r in published] == [0, 3, 5]
    assert {r["suites"].keys() - {"held_out", "bfcl"} == {"train_probe"} for r in published[1:]} == {True}
    assert "held_out" not in published[1]["suites"] and published[1]["vs_v0"]["train_probe"]["n"] == 4
    last = published[-1]
    assert last["probe_s"] == pytest.approx(36.0) and last["run_s"] == pytest.approx(20 + 700 + 100 + 600 + 8 + 8)


def test_a_round_that_would_pass_the_budget_waits(tmp_path):
    clock, published = Clock(), []
    fake = TimedEval(clock, item_s=30.0)  # baseline 300 s
    pr = prober(tmp_path, fake, published, clock)
    drive(pr, fake, clock, [(0, 0), (2, 700), (3, 1000)])
    # at 1,000 s served the probe has taken 300 s: a 120-s round would make it 420 of 1,120 (> 10%): it waits
    assert [r["kind"] for r in published] == ["baseline"] and pr.deferred == 1 and not pr.affordable(4)
    clock.now += 3000  # 420 of 4,420 s: within 10%
    drive(pr, fake, clock, [(4, 0)])
    assert [r["kind"] for r in published] == ["baseline", "periodic"]
    assert published[-1]["probe_s"] / published[-1]["run_s"] <= 0.10


def test_a_dropped_baseline_is_asked_again_while_the_feed_goes(tmp_path):
    clock, published = Clock(), []
    fake = TimedEval(clock)
    fake.failing = 10
    pr = prober(tmp_path, fake, published, clock)
    drive(pr, fake, clock, [(0, 0), (0, 0)])
    assert pr.feed_open.is_set() and published == [] and fake.asked == [10, 10]
    fake.failing = 0
    drive(pr, fake, clock, [(0, 0)])
    assert [r["kind"] for r in published] == ["baseline"] and fake.pins == [0, 0, 0]


class MemoryCache:
    def __init__(self, tmp_path):
        self.entry = BaselineCache(tmp_path / "cache", "k")
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.entry


def test_the_warm_starts_baseline_is_cached_and_read_back_by_a_later_run(tmp_path):
    clock, first = Clock(), []
    fake = TimedEval(clock)
    cache = MemoryCache(tmp_path)
    drive(prober(tmp_path / "run1", fake, first, clock, cache=cache), fake, clock, [(0, 0)])
    assert fake.asked == [10] and cache.entry.path.is_file() and first[0]["cached"] is False
    # a later run on the same warm start: the baseline comes from the cache, nothing is asked, the feed is open
    again: list = []
    pr = prober(tmp_path / "run2", fake, again, clock, cache=cache)
    drive(pr, fake, clock, [(0, 0)])
    assert fake.asked == [10] and pr.feed_open.is_set()
    (r,) = again
    assert r["cached"] is True and r["kind"] == "baseline" and r["seconds"] == 0.0 and r["probe_s"] == 0.0
    assert r["suites"] == first[0]["suites"] and RoundFiles(tmp_path / "run2").versions() == [0]
    assert pr.item_s == pytest.approx(2.0)  # the cached round's own rate is the budget's estimate


def test_a_baseline_that_is_not_v0_alone_is_not_cached(tmp_path):
    clock, published = Clock(), []
    fake = TimedEval(clock)
    cache = MemoryCache(tmp_path)
    drive(prober(tmp_path / "run", fake, published, clock, cache=cache), fake, clock, [(3, 0)])  # served v3
    assert published[0]["kind"] == "baseline" and not cache.entry.path.exists()


def test_the_warm_start_swapped_in_as_a_version_is_the_baseline_cached_and_read_back_at_v0(tmp_path):
    """A first run serves the base model and swaps the warm start in as v1 (`ops.probe_baseline_version` 1): its
    round at v1 is the warm start's evaluation, cached; a later run serves the same weights as v0 and reads it."""
    clock, first = Clock(), []
    fake = TimedEval(clock)
    cache = MemoryCache(tmp_path)
    drive(prober(tmp_path / "run1", fake, first, clock, cache=cache, baseline_version=1), fake, clock, [(1, 0)])
    assert fake.asked == [10] and cache.entry.path.is_file() and first[0]["version"] == 1
    again: list = []
    pr = prober(tmp_path / "run2", fake, again, clock, cache=cache)
    drive(pr, fake, clock, [(0, 0)])
    assert fake.asked == [10] and again[0]["cached"] is True and again[0]["version"] == 0
    assert again[0]["version_min"] == again[0]["version_max"] == 0  # this run's number for the same weights
    third: list = []  # and the first run's own restart without its files: read at v1 again
    drive(prober(tmp_path / "run3", fake, third, clock, cache=cache, baseline_version=1), fake, clock, [(1, 0)])
    assert fake.asked == [10] and third[0]["cached"] is True and third[0]["version"] == 1


def test_cache_key_follows_the_model_items_plan_and_scorer(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights-1")
    (model / "config.json").write_text("{}")
    fp = model_fingerprint(model, memo_dir=tmp_path / "memo")
    assert fp.startswith("files:") and json.loads((tmp_path / "memo" / "fingerprints.json").read_text())
    assert model_fingerprint(model, memo_dir=tmp_path / "memo") == fp
    (model / "model.safetensors").write_bytes(b"weights-22")  # new size: memo misses, the content hash differs
    assert model_fingerprint(model, memo_dir=tmp_path / "memo") != fp
    (model / "manifest.json").write_text('{"files": {"model.safetensors": "abc"}}')
    assert model_fingerprint(model).startswith("manifest:")
    key = cache_key(fp, FULL, EvalPlan(), "s1")
    assert key == cache_key(fp, FULL, EvalPlan(), "s1")
    others = [
        cache_key("other", FULL, EvalPlan(), "s1"),  # another model
        cache_key(fp, FULL[:-1], EvalPlan(), "s1"),  # other items
        cache_key(fp, FULL, EvalPlan(), "s2"),  # another scorer
        cache_key(fp, FULL, EvalPlan(mode="sampled"), "s1"),  # asked otherwise
    ]
    assert len({key, *others}) == 5


def test_scorer_version_is_stable():
    from ops.run.feed.baseline_cache import scorer_version

    from workers.settings import WorkerSettings

    version = scorer_version()
    assert version == scorer_version() and version.startswith(WorkerSettings().scorer_version + "+")


def _served(version):
    async def served(session):
        return version

    return served


def test_the_final_round_judges_the_last_served_version_once(tmp_path):
    clock, published = Clock(), []
    fake = TimedEval(clock)
    pr = prober(tmp_path, fake, published, clock, final_timeout_s=60.0)
    drive(pr, fake, clock, [(0, 0), (7, 700)])
    fake.version = 9
    pr.served_version = _served(9)
    final = asyncio.run(pr.final_round())
    assert final.kind == "final" and final.version == 9 and final.items == len(FULL)
    assert final.records == "probe/v9-final.jsonl" and (tmp_path / final.records).is_file()
    assert final.probe_s == published[1]["probe_s"]  # after training: not counted in the share
    assert asyncio.run(pr.final_round()) is None and len(published) == 3  # v9 is judged: nothing more to ask


def test_no_final_round_when_the_baseline_already_judged_the_served_version(tmp_path):
    clock, published = Clock(), []
    fake = TimedEval(clock)
    pr = prober(tmp_path, fake, published, clock)
    drive(pr, fake, clock, [(0, 0)])
    pr.served_version = _served(0)
    assert asyncio.run(pr.final_round()) is None and len(published) == 1


def test_the_feeds_final_round_is_bounded_by_its_timeout(tmp_path, caplog):
    from ops.run.feed.main import final_round

    class Slow:
        plan = ProbePlan(url="http://unused", eval=EvalPlan(), data_dir=tmp_path, final_timeout_s=0.05)
        started = False

        async def final_round(self):
            Slow.started = True
            await asyncio.sleep(30)

    asyncio.run(asyncio.wait_for(final_round(Slow()), timeout=5))
    assert Slow.started and "did not finish" in caplog.text
    off = Slow()
    off.plan = ProbePlan(url="http://unused", eval=EvalPlan(), data_dir=tmp_path, final_timeout_s=0)
    Slow.started = False
    asyncio.run(final_round(off))
    assert not Slow.started


def test_a_due_periodic_round_waits_while_the_gate_holds_the_feed(tmp_path):
    clock, published = Clock(), []
    fake = TimedEval(clock)
    pr = prober(tmp_path, fake, published, clock)
    pr.gate_open = asyncio.Event()  # cleared: the gate judges
    drive(pr, fake, clock, [(0, 0), (3, 700), (4, 30)])
    # the baseline is not a periodic round (it is pinned and may hold the feed itself); the due round waits
    assert [r["kind"] for r in published] == ["baseline"] and pr.gate_waits == 2
    pr.gate_open.set()  # the gate's judging ended
    drive(pr, fake, clock, [(5, 15)])
    assert [r["kind"] for r in published] == ["baseline", "periodic"] and published[-1]["version"] == 5
