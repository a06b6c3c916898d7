"""`slca bench soak` arithmetic on synthetic records: memory growth, /healthz percentiles, status counts, verdict."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ops.bench.soak.report import (
    MIB,
    HostileResult,
    LegalResult,
    MemorySample,
    growth,
    hostile_problem,
    retry_after_s,
    summarise,
    table,
    verdict,
    windows,
    write,
)

SECONDS = 600.0
ERROR = json.dumps({"error": {"message": "m", "type": "t", "param": None, "code": None}}).encode()


def _samples(rss_mib, redis_mib, seconds=SECONDS, step=5.0, warmup=60.0, learner=None) -> list[MemorySample]:
    """A sample every `step` s from -warmup to `seconds`; `rss_mib(t)`, `redis_mib(t)` and `learner(t)` (step,
    version; default: a step every 30 s, a version every 60 s, from step 28 at the start) give the values."""
    learner = learner or (lambda t: (28 + int((t + warmup) // 30), 28 + int((t + warmup) // 60)))
    ts = [-warmup + i * step for i in range(int((seconds + warmup) / step) + 1)]
    return [
        MemorySample(t, int(rss_mib(t) * MIB), int(redis_mib(t) * MIB), {"serve": int(rss_mib(t) * MIB)}, *learner(t))
        for t in ts
    ]


def _clean(samples, **changes):
    pings = [(t / 20, 0.004) for t in range(int(SECONDS * 20) + 1)]
    legal = [LegalResult("chat", True, [200], 0.5), LegalResult("agent", True, [429, 200], 3.0)]
    hostile = [HostileResult("text_plain_body", 415, True, 0.01, False)]
    args = {
        "seconds": SECONDS,
        "samples": samples,
        "pings": pings,
        "ping_failures": {},
        "legal": legal,
        "hostile": hostile,
        **changes,
    }
    return summarise(**args)


def test_windows_are_the_first_and_last_minute_or_a_third_of_a_short_run():
    assert windows(600.0) == ((0.0, 60.0), (540.0, 600.0))
    assert windows(90.0) == ((0.0, 30.0), (60.0, 90.0))


def test_growth_compares_medians_so_one_spike_is_not_a_trend():
    points = [(float(t), 1000 * MIB) for t in range(0, 601, 5)]
    points[3] = (15.0, 5000 * MIB)  # one spike in the first minute
    points[-2] = (595.0, 9000 * MIB)  # and one in the last
    g = growth(points, 600.0, 64, 0.05)
    assert g.first_bytes == g.last_bytes == 1000 * MIB and g.growth_bytes == 0 and g.flat is True


@pytest.mark.parametrize(
    "first_mib, last_mib, allowed_mib, flat",
    [
        (1000, 1064, 64, True),
        (1000, 1065, 64, False),  # 5 % of 1000 < 64 MiB: the absolute allowance
        (2000, 2100, 100, True),
        (2000, 2101, 100, False),  # 5 % of 2000 > 64 MiB: the relative one
        (2000, 1500, 100, True),  # shrinking is flat
    ],
)
def test_growth_allowance_is_the_larger_of_absolute_and_relative(first_mib, last_mib, allowed_mib, flat):
    points = [(float(t), (first_mib if t < 300 else last_mib) * MIB) for t in range(0, 601, 5)]
    g = growth(points, 600.0, 64, 0.05)
    assert g.allowed_bytes == allowed_mib * MIB and g.flat is flat
    assert g.growth_bytes == (last_mib - first_mib) * MIB


def test_growth_without_samples_in_a_window_is_unmeasured():
    g = growth([(10.0, 5 * MIB)], 600.0, 16, 0.1)
    assert g.flat is None and g.growth_bytes is None


def test_a_clean_run_passes_and_says_its_numbers():
    s = _clean(_samples(lambda t: 2000 + t / 100, lambda t: 40))  # the minutes' medians (t 30, 570 s): +5.4 MiB
    passed, line = verdict(s)
    # the learner trained: the criterion reads the troughs, the lowest of the first and last 3 minutes (t 0, 420 s)
    assert passed and line.startswith("PASS — RSS troughs +4.2 MiB, +0.2% (limit 100.0 MiB)")
    assert s.rss.growth_bytes == pytest.approx(5.4 * MIB) and s.rss_judged_on == "troughs"
    assert s.five_xx == 0 and s.legal_answered == s.legal_sent == 2 and s.retries_429 == 1
    assert s.healthz_p99_ms == 4.0 and s.pings == int(SECONDS * 20) + 1
    assert s.legal_by_kind == {"chat": [1, 1], "agent": [1, 1]} and s.status_counts == {"200": 2, "415": 1, "429": 1}


def test_a_leak_fails_memory_with_its_growth():
    s = _clean(_samples(lambda t: 2000 + max(t, 0) / 2, lambda t: 40))  # medians at t 30 and 570 s: +270 MiB
    passed, line = verdict(s)
    assert not passed and line.startswith("FAIL (memory flat)") and "RSS troughs +210.0 MiB" in line  # t 0, 420 s
    assert s.rss.growth_bytes == pytest.approx(270 * MIB) and s.rss_min_mib_by_minute[-1] == 2270.0
    assert s.rss_by_role_troughs_mib["serve"] == [2000.0, 2210.0]
    assert s.rss_by_role_mib["serve"] == [pytest.approx(2015.0, abs=0.1), pytest.approx(2285.0, abs=0.1)]
    # each memory row says its own flatness: the process RSS grew, Redis did not
    rows = {line.split(" | ")[0].strip("| "): line.rstrip(" |").rsplit(" | ", 1)[-1] for line in table(s).splitlines()}
    assert rows["RSS, whole system (first → last minute median)"] == "NO" and rows["Redis used_memory"] == "yes"


def test_with_the_learner_training_its_step_cycle_is_judged_on_troughs_not_on_a_minutes_median():
    """A step's 800 MiB comes and goes every 100 s: the first minute's median falls between steps, the last
    minute's during one (+800 MiB of medians), while every trough is the same 2,000 MiB. Judged on troughs with the
    learner training; the same series beside an idle learner is judged on medians, and fails."""

    def sawtooth(t):
        return 2000 + (800 if (t + 50) % 100 < 40 else 0)

    s = _clean(_samples(sawtooth, lambda t: 40))
    assert s.rss.growth_bytes == pytest.approx(800 * MIB) and not s.rss.flat
    assert s.rss_judged_on == "troughs" and s.rss_troughs.growth_bytes == 0 and verdict(s)[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in table(s).splitlines()}
    troughs = rows["RSS, whole system, troughs (lowest of the first → last 3 minutes)"]
    assert "the criterion reads this row (the learner trained)" in troughs and troughs.endswith("| yes |")
    assert set(s.rss_min_mib_by_minute) == {2000.0} and len(s.rss_min_mib_by_minute) == 10
    idle = _clean(_samples(sawtooth, lambda t: 40, learner=lambda t: (3, 1)))
    assert idle.rss_judged_on == "medians" and "memory flat" in verdict(idle)[1].split(" — ")[0]


def test_warmup_samples_and_pings_are_outside_the_windows():
    s = _clean(
        _samples(lambda t: 9000 if t < 0 else 2000, lambda t: 40),
        pings=[(-30.0, 5.0)] + [(t / 20, 0.004) for t in range(12001)],
    )
    assert s.rss.first_bytes == 2000 * MIB and s.healthz_max_ms == 4.0 and verdict(s)[0]


def test_redis_growth_fails_memory_too():
    s = _clean(_samples(lambda t: 2000, lambda t: 40 + max(t, 0) / 10))
    assert s.redis.flat is False and verdict(s)[1].startswith("FAIL (memory flat)")


def test_5xx_slow_healthz_and_unanswered_legal_requests_each_fail():
    samples = _samples(lambda t: 2000, lambda t: 40)
    five = _clean(samples, hostile=[HostileResult("deep", 500, False, 0.1, False, "HTTP 500")])
    assert five.five_xx == 1 and five.hostile_violations == 1
    assert verdict(five)[1].startswith("FAIL (0 × 5xx; hostile statuses as expected)")
    slow = _clean(samples, pings=[(t / 20, 0.004 if t % 50 else 0.2) for t in range(12001)])  # 2 % at 200 ms
    assert slow.healthz_p99_ms == 200.0 and verdict(slow)[1].startswith("FAIL (/healthz p99 < 100 ms)")
    failed_ping = _clean(samples, ping_failures={"ConnectionResetError": 1})
    assert verdict(failed_ping)[1].startswith("FAIL (/healthz")
    lost = _clean(samples, legal=[LegalResult("agent", False, [429, 429], 300.0, "no 200 within 300s")])
    assert verdict(lost)[1].startswith("FAIL (every legal request answered)") and lost.retries_429 == 1
    assert lost.first_legal_error == "no 200 within 300s"
    nothing = _clean(samples, legal=[])
    assert not verdict(nothing)[0]


def test_unmeasured_memory_fails():
    s = _clean([MemorySample(float(t), None, None) for t in range(0, 601, 5)])
    passed, line = verdict(s)
    assert not passed and "RSS not measured" in line and "Redis not measured" in line


def test_hostile_problem_checks_status_and_error_shape():
    assert hostile_problem((400,), 400, ERROR) is None
    assert hostile_problem((200, 400, 429), 200, b"{}") is None
    assert "expected 400" in hostile_problem((400,), 500, b"boom")
    assert "OpenAI-style" in hostile_problem((413,), 413, b"Request Entity Too Large")
    assert "OpenAI-style" in hostile_problem((400,), 400, b'{"error": "x"}')


@pytest.mark.parametrize(
    "value, seconds", [("2", 2.0), ("0.5", 0.5), (None, 1.0), ("soon", 1.0), ("nan", 1.0), ("0", 0.05), ("3600", 30.0)]
)
def test_retry_after(value, seconds):
    assert retry_after_s(value) == seconds


def test_write_puts_the_verdict_first_and_no_paths(tmp_path):
    samples = _samples(lambda t: 2000, lambda t: 40)
    s = _clean(samples)
    write(tmp_path, s, {"command": "slca bench soak --minutes 10", "cpu_flags": ["avx2"]}, samples, ["a note"])
    md = (tmp_path / "results.md").read_text().splitlines()
    assert md[0] == verdict(s)[1] and md[0].startswith("PASS")
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["passed"] is True and data["command"] == "slca bench soak --minutes 10"
    assert data["samples"][0] == {
        "t_s": -60.0,
        "rss_mib": 2000.0,
        "redis_mib": 40.0,
        "learner_step": 28,
        "learner_version": 28,
        "served_version": None,
        "rss_by_role_mib": {"serve": 2000.0},  # per sample: which process a rise is in
    }
    assert str(tmp_path) not in (tmp_path / "results.json").read_text()


def test_learner_steps_in_the_measured_window_are_recorded_and_an_idle_learner_fails():
    """The soak runs with the learner training: the steps (and versions) it took in the measured window are in the
    report, and a learner that took none — or could not be read — fails the soak."""
    s = _clean(_samples(lambda t: 2000, lambda t: 40))
    assert (s.learner_steps, s.learner_versions) == (20, 10) and verdict(s)[0]  # 600 s: a step / 30 s, a version / 60 s
    assert "learner steps 20 (versions 10)" in verdict(s)[1]
    idle = _clean(_samples(lambda t: 2000, lambda t: 40, learner=lambda t: (0, 0)))  # no step ever
    assert idle.learner_steps == 0 and verdict(idle)[1].startswith("FAIL (learner trained)")
    warmup_only = _clean(_samples(lambda t: 2000, lambda t: 40, learner=lambda t: (5 if t > -30 else 4, 1)))
    assert warmup_only.learner_steps == 0  # a step in the warm-up is not one in the measured window
    unread = _clean(_samples(lambda t: 2000, lambda t: 40, learner=lambda t: (None, None)))
    assert unread.learner_steps is None and not verdict(unread)[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in table(s).splitlines()}
    assert rows["learner steps / versions published"].startswith("| learner steps / versions published | 20 / 10 |")


def test_the_sampler_reads_the_learners_newest_step_from_redis(redis_url):
    """What the report's learner row is made of: each memory sample reads the newest `stats:learner` entry."""
    import time

    import redis

    from ops.bench.soak.traffic import MemorySampler, SoakPlan, Window
    from slca.contracts.stats import LearnerStepStats

    stream, plan = "slca:stats:learner", SoakPlan("http://127.0.0.1:1", 0, 60)
    sampler = MemorySampler([], redis_url, plan, Window(plan, time.monotonic()), stream)
    client = redis.Redis.from_url(redis_url)
    try:
        sampler.step(0)  # before the first step
        for step in (1, 2):
            client.xadd(stream, LearnerStepStats(step=step, version=step // 2, ts=time.time()).to_fields())
        sampler.step(1)
    finally:
        sampler.close()
        client.close()
    assert [(s.learner_step, s.learner_version) for s in sampler.samples] == [(0, 0), (2, 1)]


# --- the measured window begins at the steady state ------------------------------------------------------------
def _timeline(learner_mib, served, versions, steps, until_s: float = 2400.0) -> list[MemorySample]:
    """A sample every 5 s from the load's start (t = seconds since it) to `until_s`: serve 2650 MiB, the learner
    `learner_mib(t)`, `served(t)` the version serve serves, `versions(t)` and `steps(t)` the learner's."""
    out = []
    for i in range(int(until_s / 5) + 1):
        t = i * 5.0
        roles = {"serve": 2650 * MIB, "learn": int(learner_mib(t) * MIB)}
        out.append(MemorySample(t, sum(roles.values()), 40 * MIB, roles, steps(t), versions(t), served(t)))
    return out


def _fresh_clone(extra_mib=lambda t: 0.0, publishes: bool = True) -> list[MemorySample]:
    """The fresh-clone soak's shape (bench/soak/fresh-clone-learning-one-engine): the learner loads its model by
    its first step (115 s); its first two steps change no weight; the third (400 s) allocates the optimizer state
    (+1.1 GB) and publishes v1, which serve serves from 430 s; then a step and a version every 120 s."""

    def version(t):
        return 0 if not publishes or t < 400 else 1 + int((t - 400) // 120)

    def steps(t):
        return 0 if t < 115 else 1 if t < 205 else 2 if t < 400 else 3 + int((t - 400) // 120)

    def learner(t):
        return (490 if t < 115 else 1000 if t < 400 or not publishes else 2150) + extra_mib(t)

    return _timeline(learner, lambda t: version(t - 30) if t >= 30 else 0, version, steps)


def _windowed(samples, warmup_s=60.0, cap_s=1200.0, seconds=SECONDS):
    """`samples` (timed from the load's start) through the live decision, one at a time as the sampler takes
    them (`Window.consider`), up to the window's end, then timed from the window's start (`rebase`)."""
    from ops.bench.soak.traffic import SoakPlan, Window, rebase

    window = Window(SoakPlan("http://127.0.0.1:1", warmup_s, seconds, warmup_max_s=cap_s), began=0.0)
    taken = []
    for sample in samples:
        if sample.t_s >= window.stop_at:
            break
        window.consider(sample.t_s, sample)
        taken.append(sample)
    pings = rebase(window, taken, [(t / 20, 0.004) for t in range(int(taken[-1].t_s * 20))])
    return _clean(taken, pings=pings, window=window.started())


def test_the_steady_state_is_a_version_published_since_the_soak_began_and_served():
    from ops.bench.soak.report import steady_state

    def at(step, version, served):
        return MemorySample(0.0, None, None, {}, step, version, served)

    assert steady_state(at(3, 1, 1), baseline_version=0)
    assert not steady_state(at(2, 0, 0), 0)  # stepping, but no weight changed yet: no optimizer state
    assert not steady_state(at(3, 1, 0), 0)  # published, serve not swapped yet
    assert not steady_state(at(30, 5, 5), 5)  # attached: a version newer than the one it began at
    assert steady_state(at(31, 6, 6), 5)
    assert not steady_state(at(3, 1, None), 0) and not steady_state(at(3, 1, 1), None)  # not read


def test_start_up_before_the_first_published_version_served_is_warm_up_not_a_leak():
    """The fresh-clone soak failed on memory (+1.7 GB): the learner loaded its model and allocated its optimizer
    state inside a window that began after a fixed minute. Begun once serve serves the learner's first version,
    the same system is flat, and the report says when the window began and why."""
    fixed = _clean([replace(s, t_s=s.t_s - 60) for s in _fresh_clone()[: 660 // 5]])  # as before: a fixed minute
    assert fixed.rss.flat is False and fixed.rss.growth_bytes > 1000 * MIB

    s = _windowed(_fresh_clone())
    assert s.window.steady and s.window.warmup_s == 430.0
    assert (s.window.learner_step, s.window.learner_version, s.window.served_version) == (3, 1, 1)
    assert s.rss.flat is True and s.rss.growth_bytes == 0
    assert s.rss_by_role_mib["learn"] == [2150.0, 2150.0]
    assert s.learner_steps == 5 and s.learner_versions == 5  # steps in the measured window [430 s, 1030 s]
    passed, line = verdict(s)
    assert passed, line
    assert line.endswith("window from 7m10s (learner step 3 at v1, serving v1: a version published since v0 served)")
    rows = {r.split(" | ")[0].strip("| "): r for r in table(s).splitlines()}
    assert rows["measured window began"].startswith("| measured window began | 7m10s |")


def test_growth_after_the_steady_state_still_fails_memory():
    s = _windowed(_fresh_clone(extra_mib=lambda t: max(0.0, t - 430) * 0.7))  # +0.7 MiB/s once steady: a leak
    assert s.window.steady and s.window.warmup_s == 430.0
    passed, line = verdict(s)
    # judged on troughs (the learner trains): the lowest of the window's first and last 3 minutes, 420 s apart
    assert not passed and line.startswith("FAIL (memory flat)") and s.rss_judged.growth_bytes > 290 * MIB


def test_the_warm_up_lasts_at_least_its_minutes():
    steady_at_once = _timeline(lambda t: 2000, lambda t: 4, lambda t: 4 if t < 20 else 5, lambda t: 9, 900)
    served_later = [replace(x, served_version=5 if x.t_s >= 25 else 4) for x in steady_at_once]
    s = _windowed(served_later, warmup_s=60.0)
    assert s.window.steady and s.window.warmup_s == 60.0 and s.window.baseline_version == 4


def test_a_learner_that_never_publishes_within_the_cap_fails_and_says_so():
    """No version published (every step changed nothing, or no step at all) within the cap: the window begins at
    the cap anyway, and the soak fails, saying the learner never reached steady state."""
    s = _windowed(_fresh_clone(publishes=False), cap_s=600.0)
    assert not s.window.steady and s.window.warmup_s == 600.0 and s.window.cap_s == 600.0
    passed, line = verdict(s)
    assert not passed and "steady state before the window" in line.split(" — ")[0]
    assert "window from 10m00s: the learner never reached steady state within the 10m00s cap" in line
    assert "(learner step 4 at v0, serving v0; no version published since v0 served)" in line
    idle = _windowed(_timeline(lambda t: 500, lambda t: 0, lambda t: 0, lambda t: 0), cap_s=600.0)
    failed = verdict(idle)[1].split(" — ")[0]
    assert "learner trained" in failed and "steady state before the window" in failed


def test_a_window_no_sample_began_is_at_the_cap_and_not_steady():
    from ops.bench.soak.traffic import SoakPlan, Window

    window = Window(SoakPlan("http://127.0.0.1:1", 60.0, 600.0, warmup_max_s=300.0), began=100.0)
    assert window.t0 == 400.0 and window.stop_at == 1000.0  # the latest it can be, until a sample begins it
    start = window.started()
    assert (start.warmup_s, start.steady, start.cap_s) == (300.0, False, 300.0)
    window.consider(130.0, MemorySample(30.0, None, None, {}, 1, 1, 1))  # before the warm-up's minimum: not yet
    assert not window.begun.is_set() and window.baseline_version == 1


def test_served_version_reads_readyz():
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from ops.bench.soak.traffic import served_version

    class Ready(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"status": "ready", "policy_version": 3}).encode()
            self.send_response(200 if self.path == "/readyz" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Ready)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert served_version(f"http://127.0.0.1:{server.server_port}") == 3
    finally:
        server.shutdown()
        server.server_close()
    assert served_version(f"http://127.0.0.1:{server.server_port}", timeout_s=0.5) is None  # nothing answers


def test_the_soaks_system_keeps_the_warm_start_the_other_benches_do_not(tmp_path):
    """On the base model every group had zero advantage and the learner never published: a soak without a warm start
    on a fresh machine never became steady. Its `slca up` keeps the warm start (cached: served; else trained beside
    serving); the RL bench's pipeline side still runs none."""
    from ops.bench.slca_up import bench_sets
    from ops.bench.soak.main import soak_sets

    sets = soak_sets(tmp_path / "var", 8123, "127.0.0.1:9")
    assert not any(s.startswith("ops.warm_start_minutes=") for s in sets)
    assert f"common.data_dir={tmp_path / 'var'}" in sets and "weights.bind=127.0.0.1:9" in sets
    assert "ops.warm_start_minutes=0" in bench_sets(tmp_path / "var", 8123)


def test_the_soak_loads_the_system_only_once_its_learner_started(tmp_path):
    import json
    import os

    from ops.bench.soak.main import System, quiet_start
    from ops.common.up_state import state_path

    system = System(url="http://127.0.0.1:1", roots=[], redis_url=None, mode="test", data_dir=tmp_path)
    processes = [{"name": "serve", "pid": os.getpid()}, {"name": "warmstart", "pid": os.getpid()}]
    state_path(tmp_path).write_text(json.dumps({"supervisor_pid": os.getpid(), "processes": processes}))
    assert "had not started" in quiet_start(system, bound_s=0.2, poll_s=0.05)  # the warm start still trains
    processes.append({"name": "learn", "pid": os.getpid()})
    state_path(tmp_path).write_text(json.dumps({"supervisor_pid": os.getpid(), "processes": processes}))
    assert "the learner started" in quiet_start(system, bound_s=5, poll_s=0.05)
    assert quiet_start(System("http://x", [], None, "attached"), bound_s=5) is None  # attached: not ours to wait on
