"""`slca bench rl`'s arithmetic and bookkeeping: per-hour rates, ratios, the verdict, process roles, the
learner's step log, the /proc sampler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ops.observe.procs import ProcInfo, TreeSampler, descendants, proc_table, read_cmdline, read_proc
from ops.bench.rl.report import GIB, MEMORY_SAMPLE_S, SideResult, ratio_spread, ratios, table, verdict, where_time_goes
from ops.bench.rl.main import trl_side_result
from ops.bench.rl.slca_side import SlcaSpec, first_step_logged, learner_steps, pipeline_sets
from ops.bench.rl.trl_side import Share, StepLedger, TrlCounts, close_step, generation_shares, start_window
from ops.bench.slca_up import role_of
from learner.step_stats import GroupCounts


def side(
    name: str,
    seconds: float = 600,
    completions: int = 80,
    updates: int = 10,
    tokens: int = 6000,
    rss_gib: float = 4.0,
    **kw,
) -> SideResult:
    trained = kw.pop("trained", completions)
    return SideResult(
        name=name,
        seconds=seconds,
        completions=completions,
        completions_trained=trained,
        updates=updates,
        generated_tokens=tokens,
        peak_rss_bytes=int(rss_gib * GIB),
        **kw,
    )


def test_per_hour_rates_scale_the_window_to_an_hour():
    s = side("slca", seconds=600, completions=80, updates=10, tokens=6000)
    assert s.completions_per_hour == pytest.approx(480)
    assert s.updates_per_hour == pytest.approx(60)
    assert s.tokens_per_s == pytest.approx(10)
    d = s.to_dict()
    assert d["completions_per_hour"] == pytest.approx(480) and d["peak_rss_gib"] == pytest.approx(4.0)


def test_an_empty_window_is_an_error_not_a_division_by_zero():
    with pytest.raises(ValueError, match="window"):
        _ = side("trl", seconds=0).completions_per_hour


def test_ratios_are_slca_over_trl_and_none_where_trl_did_nothing():
    slca = side("slca", seconds=600, completions=160, updates=20)
    trl = side("trl", seconds=300, completions=40, updates=5)
    r = ratios(slca, trl)
    assert r["completions_per_hour"] == pytest.approx((160 / 600) / (40 / 300))  # different windows: rates compared
    assert r["updates_per_hour"] == pytest.approx((20 / 600) / (5 / 300))
    assert ratios(slca, side("trl", completions=0, updates=0, tokens=0))["completions_per_hour"] is None


@pytest.mark.parametrize(
    "median, rss, expect", [(2.1, 4.0, ("met", "met")), (1.9, 4.0, ("NOT met", "met")), (2.5, 7.0, ("met", "NOT met"))]
)
def test_verdict_checks_the_median_trained_token_ratio_and_the_peak_memory(median, rss, expect):
    line = verdict(median, [1.5, 3.0], 0.75, rss)[0]
    assert f"median over pairs = {median:.2f} (75% interval 1.50–3.00)" in line
    assert f"target ≥ 2.0: {expect[0]})" in line and f"target ≤ 6: {expect[1]})" in line


def test_ratio_spread_gives_each_rates_median_and_range_over_the_pairs():
    pairs = [{"x": 1.0, "y": None}, {"x": 3.0, "y": None}, {"x": 2.0, "y": None}]
    assert ratio_spread(pairs) == {"x": {"median": 2.0, "min": 1.0, "max": 3.0}, "y": None}


def test_a_side_result_survives_its_json_form():
    r = side("slca", seconds=600, trained_tokens=6000)
    back = SideResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r and back.trained_tokens_per_s == 10.0


def test_table_has_a_ratio_column_only_with_both_sides():
    both = table([side("trl", completions=80), side("slca", completions=200)])
    assert "slca ÷ TRL" in both[0] and any(line.rstrip().endswith("2.50×") for line in both)
    alone = table([side("slca")])
    assert "÷" not in "".join(alone) and "slca" in alone[0]


def test_where_time_goes_lists_processes_with_their_share():
    s = side(
        "slca", seconds=100, cpu_s_by_process={"serve": 150.0, "learn": 50.0}, peak_rss_by_process={"serve": 2 * GIB}
    )
    lines = where_time_goes(s)
    serve = next(line for line in lines if "serve" in line)
    assert "75.0%" in serve and "1.50 cores" in serve and "2.00 GiB" in serve
    assert "25.0%" in next(line for line in lines if "learn" in line)


@pytest.mark.parametrize(
    "cmdline, role",
    [
        ("/v/bin/python -m slca --set a=b serve", "serve"),
        ("/v/bin/python -m slca --set x=1 learn", "learn"),
        ("/v/bin/python -m celery -A workers.celery_app worker --pool prefork", "worker"),
        ("/v/bin/python -m slca assembler", "assembler"),
        ("/v/bin/python -m slca --set ops.feed_pack=everyday up --duration 9", "supervisor (slca up)"),
        ("/usr/bin/redis-server 127.0.0.1:6379", "redis"),
        ("/v/bin/python -m slca --set x=1 gate", "gate"),
        ("/v/bin/python -m serve.engines.grammar_host --memory-mib 512", "grammar host (serve's)"),
        ("/bin/sh -c true", "other: sh"),
    ],
)
def test_role_of_names_pipeline_processes(cmdline, role):
    assert role_of(cmdline) == role


def learner_line(ts: float, groups: list[str], skipped_zero: int = 0, tokens: int = 0, **counts) -> dict:
    """A `metrics.jsonl` line as the learner writes it: the step's place and its `GroupCounts` through their writer
    (`counts`: `GroupCounts` fields); `tokens_trained` is what the loss counted."""
    trained = counts.pop("tokens_trained", tokens)
    line = {"ts": ts, "groups": groups, "skipped_zero": skipped_zero, "tokens": tokens, "tokens_trained": trained}
    return {**line, **GroupCounts(given=len(groups), **counts).to_log()}


def test_learner_steps_counts_updates_groups_and_tokens_inside_the_window_not_zero_advantage_steps(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [
        learner_line(5.0, ["a"], tokens=50, trained=1, trajectories=4),
        learner_line(15.0, ["b", "c"], skipped_zero=1, tokens=100, tokens_trained=60, trained=1, trajectories=4),
        learner_line(20.0, ["d", "e"], skipped_zero=2, tokens=90, tokens_trained=0),  # all zero: no update
        learner_line(25.0, ["f"], tokens=70, trained=1, trajectories=4),
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + '\n{"step": 5, "ts": 2')  # last line cut by the stop
    c = learner_steps(path, 10.0, 30.0)
    assert (c.steps, c.updates, c.groups_trained, c.trajectories_trained, c.tokens_trained) == (3, 2, 2, 8, 130)
    assert (c.model_tokens, c.prompt_tokens) == (0, 0)  # lines without the rate: nothing known of the forward
    assert learner_steps(tmp_path / "missing.jsonl", 0, 1).steps == 0
    assert first_step_logged(path) and not first_step_logged(tmp_path / "missing.jsonl")


def test_learner_steps_does_not_count_the_groups_success_variance_screening_dropped_as_trained(tmp_path):
    # issue 40: three groups given, two screened out (every member the same success), none of zero advantage;
    # `len(groups) - skipped_zero` would say 3 groups (24 completions) trained where the learner trained one
    path = tmp_path / "metrics.jsonl"
    row = learner_line(1.0, ["a", "b", "c"], tokens=40, screened=2, trained=1, trajectories=8)
    path.write_text(json.dumps(row) + "\n")
    c = learner_steps(path, 0.0, 2.0)
    assert (c.updates, c.groups_trained, c.trajectories_trained, c.tokens_trained) == (1, 1, 8, 40)
    everything_screened = learner_line(1.0, ["a", "b"], screened=2)
    path.write_text(json.dumps(everything_screened) + "\n")
    c = learner_steps(path, 0.0, 2.0)
    assert (c.steps, c.updates, c.groups_trained) == (1, 0, 0)


def test_trl_counts_only_steps_with_unequal_rewards_as_updates_and_starts_after_the_cold_step():
    counts = TrlCounts(completions=8, generated_tokens=99, reward_sum=3.0, prompt_tokens=800)
    start_window(counts)  # the cold first step's completions do not count
    assert (counts.completions, counts.generated_tokens, counts.reward_sum, counts.prompt_tokens) == (0, 0, 0.0, 0)
    ledger = StepLedger(group_size=2)
    close_step(counts, ledger.step_end([(0.0, 10, 100), (1.0, 20, 100)]))
    close_step(counts, ledger.step_end([(0.5, 30, 90), (0.5, 40, 90)]))  # all equal: zero advantage
    assert (counts.steps, counts.updates, counts.zero_advantage_steps) == (2, 1, 1)
    assert (counts.completions_trained, counts.trained_tokens, counts.prompt_tokens_trained) == (2, 30, 200)


def test_one_generation_batch_feeds_steps_per_generation_steps_in_equal_shares():
    # TRL's steps_per_generation 4: the first step generates 4 groups of 2, the next three steps generate nothing
    ledger, pending = StepLedger(group_size=2, steps_per_generation=4), []
    pending += [(0.0, 10, 50), (1.0, 10, 50), (1.0, 20, 60), (1.0, 20, 60)]  # group 2: equal rewards
    pending += [(0.0, 30, 70), (0.5, 30, 70), (0.2, 1, 80), (0.3, 1, 80)]
    shares = [ledger.step_end(pending), ledger.step_end([]), ledger.step_end([]), ledger.step_end([])]
    assert pending == [] and all(s.update for s in shares)
    assert sum(s.completions for s in shares) == 6 and sum(s.tokens for s in shares) == 82
    assert sum(s.prompt_tokens for s in shares) == 400 and [s.completions for s in shares] == [2, 2, 1, 1]
    assert ledger.step_end([]) == Share()  # a step with no batch left: nothing trained, not an update
    assert not generation_shares([(1.0, 5, 9), (1.0, 5, 9)], 2, 1)[0].update


def test_trl_side_result_reports_trained_figures_and_the_prompt_truncation():
    c = TrlCounts(
        seconds=600,
        steps=10,
        updates=6,
        zero_advantage_steps=4,
        completions=80,
        completions_trained=48,
        generated_tokens=6000,
        trained_tokens=3000,
        prompts_seen=10,
        prompts_truncated=7,
        cold_step_s=40,
        config={"max_prompt_length": 512},
    )
    r = trl_side_result(c, 2 * GIB, {"trl (one process)": 100.0})
    assert (r.updates, r.completions_trained, r.trained_tokens, r.steps) == (6, 48, 3000, 10)
    assert r.trained_tokens_per_s == 5.0 and r.extra["prompts_truncated"] == 7
    assert any("max_prompt_length 512: 7 of 10 prompts truncated" in n for n in r.notes)
    assert any("4 of 10 steps had zero advantage" in n for n in r.notes)
    ratio = ratios(side("slca", seconds=600, trained_tokens=6000), r)["trained_tokens_per_s"]
    assert ratio == pytest.approx(2.0)


def test_rl_results_refuse_machine_paths_and_record_the_typed_command(tmp_path):
    from ops.bench.ab import MachinePathError
    from ops.bench.rl.main import write_outputs

    data = {"sides": {"slca": side("slca").to_dict()}}
    with pytest.raises(MachinePathError):
        write_outputs(tmp_path / "a", ["x"], {**data, "command": "slca rl --out /srv/x", "model": "warm"})
    with pytest.raises(MachinePathError):
        write_outputs(tmp_path / "b", ["logs in /tmp/slca-bench-rl-logs-1"], {**data, "command": "slca bench rl"})
    write_outputs(tmp_path / "c", ["ok"], {**data, "command": "slca bench rl --minutes 10", "model": "warm"})
    data = json.loads((tmp_path / "c" / "results.json").read_text())
    assert data["sides"]["slca"]["trained_tokens_per_s"] == 0 and (tmp_path / "c" / "table.md").is_file()


def test_pipeline_sets_fix_what_the_comparison_fixes(tmp_path):
    spec = SlcaSpec(
        model="/m", pack="everyday", group_size=8, max_new_tokens=128, seconds=60, extra_sets=("serve.engine=hf",)
    )
    sets = pipeline_sets(spec, tmp_path, "redis://127.0.0.1:1/0", 1234)
    values = [sets[i + 1] for i in range(0, len(sets), 2)]
    assert all(sets[i] == "--set" for i in range(0, len(sets), 2))
    for expected in (
        "workers.group_size=8",
        "ops.feed_max_tokens=128",
        "ops.feed_max_turns=1",
        "ops.warm_start_minutes=0",
        "ops.probe_enabled=false",
        "serve.port=1234",
        "common.model=/m",
    ):
        assert expected in values
    assert values[-1] == "serve.engine=hf"  # extra settings come last: they win


def test_as_shipped_keeps_checkpointing_and_the_probe_and_runs_the_feeds_budget(tmp_path):
    from argparse import Namespace

    from ops.bench.rl.main import COMPARED_BUDGET, episode_budget
    from slca.cli import CliError
    from slca.config import load_config

    shipped = SlcaSpec(model="/m", pack="everyday", group_size=8, max_new_tokens=192, seconds=60, as_shipped=True)
    values = pipeline_sets(shipped, tmp_path, "redis://127.0.0.1:1/0", 1234)[1::2]
    assert not {"ops.probe_enabled=false", "learner.gradient_checkpointing=false"} & set(values)
    compared = replace(shipped, as_shipped=False)
    assert {"ops.probe_enabled=false", "learner.gradient_checkpointing=false"} <= set(
        pipeline_sets(compared, tmp_path, "redis://127.0.0.1:1/0", 1234)[1::2]
    )
    config = load_config(None, ["ops.feed_max_tokens=160"])
    args = Namespace(as_shipped=True, max_new_tokens=None, max_turns=None)
    episode_budget(args, config)
    assert (args.max_new_tokens, args.max_turns) == (160, 3)
    args = Namespace(as_shipped=False, max_new_tokens=None, max_turns=None)
    episode_budget(args, config)
    assert (args.max_new_tokens, args.max_turns) == COMPARED_BUDGET
    with pytest.raises(CliError, match="--as-shipped"):
        episode_budget(Namespace(as_shipped=True, max_new_tokens=128, max_turns=None), config)


def test_descendants_walks_the_tree_only_below_the_root():
    table = {
        1: ProcInfo(0, 0, 0, "init"),
        10: ProcInfo(1, 0, 0, "up"),
        11: ProcInfo(10, 0, 0, "serve"),
        12: ProcInfo(11, 0, 0, "child"),
        20: ProcInfo(1, 0, 0, "other"),
    }
    assert descendants(10, table) == {10, 11, 12}


def test_the_sampler_reads_command_lines_only_in_its_tree_and_rss_from_stat(monkeypatch):
    import ops.observe.procs as procs

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; x = bytearray(32 << 20); print(flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    try:
        child.stdout.readline()  # its pages are touched
        assert "bytearray" in read_cmdline(child.pid)
        table = proc_table(cmdlines=False)
        assert table[child.pid].cmdline == "" and "bytearray" in proc_table()[child.pid].cmdline
        statm_resident = int(Path(f"/proc/{child.pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        assert abs(table[child.pid].rss_bytes - statm_resident) < 1 << 20  # a sleeping child: the same pages
        assert table[child.pid].rss_bytes > 32 << 20
        read: list[int] = []
        monkeypatch.setattr(procs, "read_cmdline", lambda pid: read.append(pid) or read_cmdline(pid))
        sampler = TreeSampler([child.pid], lambda cmd: "child" if "bytearray" in cmd else "other", interval_s=60)
        sampler.sample()
        assert read == [child.pid]  # the machine's other processes: their stat only
        assert sampler.cpu_s[child.pid][0] == "child" and sampler.peak_rss_by_role["child"] > 32 << 20
    finally:
        child.kill()
        child.wait()


def test_tree_sampler_sums_a_child_and_keeps_its_cpu_after_it_exits():
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nx = bytearray(64 << 20)\nt = time.process_time()\n"
            "while time.process_time() - t < 0.3: pass\ntime.sleep(0.5)",
        ]
    )
    sampler = TreeSampler([os.getpid()], lambda cmd: "child" if "bytearray" in cmd else "me", interval_s=0.05).start()
    child.wait()
    sampler.stop()
    assert read_proc(os.getpid()) is not None and sampler.samples >= 3
    assert sampler.peak_rss_by_role.get("child", 0) > 60 << 20
    assert sampler.cpu_by_role()["child"] >= 0.2


def test_tree_sampler_says_how_often_it_read_and_the_bench_reads_ten_times_a_second():
    sampler = TreeSampler([os.getpid()], lambda cmd: "me", interval_s=60)
    assert sampler.samples_per_s == 0.0
    sampler.sample()
    assert sampler.samples_per_s == 0.0  # one reading has no rate
    sampler.began_s -= 2.0  # the first reading two seconds before the next
    sampler.sample()
    assert 0.4 < sampler.samples_per_s <= 0.5
    assert MEMORY_SAMPLE_S <= 0.1
    assert "memory readings per second" in "\n".join(table([side("slca", memory_samples_per_s=11.0)]))


def test_the_sampler_keeps_its_clock_when_a_reading_takes_time():
    # readings of 0.05 s at an interval of 0.1 s start 0.1 s apart (waiting the interval after each: 0.15)
    now = [0.0]
    started: list[float] = []

    class FakeStop:
        def is_set(self) -> bool:
            return len(started) >= 5

        def wait(self, seconds: float) -> None:
            now[0] += seconds

    class SlowReading(TreeSampler):
        def sample(self) -> None:
            started.append(now[0])
            now[0] += 0.05

    sampler = SlowReading([os.getpid()], lambda cmd: "me", interval_s=0.1, _stop=FakeStop())
    sampler.read_until_stopped(clock=lambda: now[0])
    assert [round(b - a, 9) for a, b in zip(started, started[1:])] == [0.1] * 4


def test_the_sampler_counts_pages_two_processes_share_once():
    # two sleeping interpreters map the same libpython; the tree is theirs alone (the test's own process may have
    # other children: an xdist worker's, another test's)
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    try:
        sampler = TreeSampler([c.pid for c in children], lambda cmd: "child", interval_s=60, pss_every_s=0.0)
        for _ in range(3):  # each reading refreshes one process's shared excess: both are read
            sampler.sample()
        assert set(sampler.shared_excess) == {c.pid for c in children}
        assert 0 < sampler.peak_pss_bytes < sampler.peak_rss_bytes
    finally:
        for c in children:
            c.kill()
            c.wait()


def test_the_pss_estimate_reads_the_largest_unread_first_counts_the_unread_whole_and_forgets_the_gone(monkeypatch):
    import ops.observe.procs as procs

    tables = [{1: ProcInfo(0, 1000, 0.0, "a"), 2: ProcInfo(1, 500, 0.0, "b")}] * 2
    tables.append({1: ProcInfo(0, 1000, 0.0, "a"), 3: ProcInfo(1, 500, 0.0, "c")})
    monkeypatch.setattr(procs, "proc_table", lambda cmdlines=True: tables.pop(0))
    monkeypatch.setattr(procs, "read_cmdline", {1: "a", 2: "b", 3: "c"}.__getitem__)
    monkeypatch.setattr(procs, "read_rss_pss", {1: (1000, 600), 2: (500, 400), 3: (500, 450)}.get)
    sampler = TreeSampler([1], lambda cmd: cmd, interval_s=60, pss_every_s=0.0)
    sampler.sample()  # pid 1 read (excess 400); pid 2 not yet: its whole 500
    assert sampler.shared_excess == {1: 400} and sampler.peak_pss_bytes == 1100
    sampler.sample()  # pid 2 read: 600 + 400, below the peak
    assert sampler.shared_excess == {1: 400, 2: 100} and sampler.peak_pss_bytes == 1100
    sampler.sample()  # pid 2 gone; pid 3 is new and read first
    assert sampler.shared_excess == {1: 400, 3: 50} and set(sampler._pss_read_at) == {1, 3}
    assert sampler.peak_pss_by_role == {"a": 600, "b": 500} and sampler.peak_rss_bytes == 1500


def test_tree_sampler_keeps_a_childs_role_while_it_is_an_unreaped_zombie():
    # an exited child that is not yet waited for has an empty command line; its CPU stays under its own role
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nx = bytearray(1 << 20)\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass",
        ]
    )
    sampler = TreeSampler([os.getpid()], lambda cmd: "child" if "bytearray" in cmd else "me", interval_s=60)
    while sampler.cpu_s.get(child.pid, ("me", 0))[0] != "child":
        sampler.sample()
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)  # the child is still running its loop
    sampler.sample()
    child.wait()
    assert sampler.cpu_s[child.pid][0] == "child" and sampler.cpu_by_role()["child"] > 0


def test_the_pipeline_gets_the_wall_time_trl_actually_had():
    from ops.bench.rl.main import same_wall_time

    assert same_wall_time(600, side("trl", seconds=661)) == 661  # TRL's last step overran the deadline
    assert same_wall_time(600, side("trl", seconds=600)) == 600
    assert same_wall_time(600, None) == 600


def test_alternated_windows_resume_after_an_interruption_and_report_per_pair_ratios(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import ops.bench.rl.main as rl

    calls: list[str] = []

    def fake(name: str, tokens_per_window: list[int]):
        def run(spec, log_dir):
            calls.append(f"{name}:{log_dir.name}")
            if len(calls) == 4 and stop_at_fourth:
                raise KeyboardInterrupt  # the run dies inside its fourth window
            return side(name, seconds=600, trained_tokens=tokens_per_window[len([c for c in calls if name in c]) - 1])

        return run

    args = SimpleNamespace(out=tmp_path / "out", pairs=3, order="alternate", seed=0)
    common = {
        "model": "m",
        "pack": "p",
        "group_size": 8,
        "max_new_tokens": 64,
        "minutes_per_window": 10,
        "precision": "bfloat16",
        "lr": 1e-5,
        "pipeline_sets": [],
    }
    slca_spec = lambda trl: trl  # noqa: E731 (the fakes ignore their spec)
    stop_at_fourth = True
    monkeypatch.setattr(rl, "run_trl_side", fake("trl", [1000, 1000, 1000]))
    monkeypatch.setattr(rl, "run_slca_side", fake("slca", [3000, 2000, 4000]))
    with pytest.raises(KeyboardInterrupt):
        rl.run_alternated(args, None, slca_spec, tmp_path / "logs", common)
    assert calls == ["trl:pair1-trl", "slca:pair1-slca", "slca:pair2-slca", "trl:pair2-trl"]
    stop_at_fourth, calls[:] = False, []
    monkeypatch.setattr(rl, "run_trl_side", fake("trl", [1000, 1000]))
    monkeypatch.setattr(rl, "run_slca_side", fake("slca", [4000]))
    lines, data = rl.run_alternated(args, None, slca_spec, tmp_path / "logs", common)
    assert calls == ["trl:pair2-trl", "trl:pair3-trl", "slca:pair3-slca"]  # only what was missing
    assert data["ab"]["ratio_b_over_a"] == [3.0, 2.0, 4.0] and data["ab"]["median_ratio"] == 3.0
    assert data["ratios_slca_over_trl"]["trained_tokens_per_s"] == {"median": 3.0, "min": 2.0, "max": 4.0}
    assert any("median over pairs = 3.00" in line and "target ≥ 2.0: met" in line for line in lines)
    with pytest.raises(Exception, match="other settings"):
        rl.run_alternated(args, None, slca_spec, tmp_path / "logs", {**common, "lr": 2e-5})


def test_trl_generates_on_the_pipelines_engine_and_a_different_one_is_refused():
    from ops.bench.rl.main import trl_generation_for
    from ops.bench.rl.trl_side import TrlSpec, generation_config
    from slca.cli import CliError

    assert trl_generation_for("hf", None) == "hf"
    assert trl_generation_for("vllm", None) == "vllm-colocate"
    assert trl_generation_for("vllm", "vllm-colocate") == "vllm-colocate"
    with pytest.raises(CliError, match="different engines.*serve.engine=hf"):
        trl_generation_for("vllm", "hf")
    spec = TrlSpec("m", "everyday", 8, 128, 60.0, lr=1e-6, bf16=False, generation="vllm-colocate", max_model_len=1024)
    assert generation_config(spec) == {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 1024}
    assert generation_config(TrlSpec("m", "everyday", 8, 128, 60.0, lr=1e-6, bf16=False)) == {"use_vllm": False}
