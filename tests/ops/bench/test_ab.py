"""The shared side-by-side method (ops/bench/ab.py) with fake, deterministic sides: alternation, warm-up
exclusion, window rule, ratio and interval arithmetic, load recording, the refusal of machine paths."""

from __future__ import annotations

import json
import os

import pytest

from ops.bench import ab
from ops.bench.common import bench_command, model_name


class Fake:
    """A side whose n-th call returns figures[n]; every call (warm-up or measure) is logged."""

    def __init__(self, name: str, figures: list[float], log: list[str], warm: bool = False):
        self.name, self.figures, self.log, self.calls = name, list(figures), log, 0
        self.side = ab.Side(name, self.measure, self.warmup if warm else None)

    def measure(self) -> float:
        self.log.append(f"{self.name}:measure")
        value = self.figures[self.calls]
        self.calls += 1
        return value

    def warmup(self) -> None:
        self.log.append(f"{self.name}:warmup")


def machine(loads):
    it = iter(loads)
    return lambda: ab.machine_now(lambda: next(it))


def test_sides_alternate_which_goes_first_and_warm_up_is_the_same_for_both_and_not_counted():
    log: list[str] = []
    a, b = Fake("old", [999, 10, 10, 10, 10], log), Fake("new", [1, 20, 30, 40, 50], log)
    r = ab.alternate(a.side, b.side, pairs=4, warmup=1, machine=machine([(1, 1, 1), (2, 2, 2)]))
    # warm-up: one discarded window per side, in the first pair's order; then A B, B A, A B, B A
    assert log == ["old:measure", "new:measure"] + ["old:measure", "new:measure", "new:measure", "old:measure"] * 2
    assert r.orders == [["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]]
    assert [(w.pair, w.position, w.side) for w in r.windows][:4] == [
        (0, 0, "old"),
        (0, 1, "new"),
        (1, 0, "new"),
        (1, 1, "old"),
    ]
    assert r.figures("old") == [10, 10, 10, 10] and r.figures("new") == [20, 30, 40, 50]  # 999 and 1: warm-up
    assert r.ratios() == [2.0, 3.0, 4.0, 5.0]


def test_a_warmup_callable_replaces_the_discarded_window():
    log: list[str] = []
    a, b = Fake("a", [1, 1, 1], log, warm=True), Fake("b", [2, 2, 2], log, warm=True)
    ab.alternate(a.side, b.side, pairs=3, warmup=2, machine=machine([(0, 0, 0)] * 2))
    assert log[:4] == ["a:warmup", "a:warmup", "b:warmup", "b:warmup"] and log.count("a:measure") == 3


def test_random_order_is_reproducible_from_the_recorded_seed_and_not_always_a_first():
    orders = ab.pair_orders(40, "random", seed=7)
    assert orders == ab.pair_orders(40, "random", seed=7)
    firsts = [o[0] for o in orders]
    assert 0 < firsts.count("A") < 40
    log: list[str] = []
    r = ab.alternate(
        Fake("a", [1] * 9, log).side,
        Fake("b", [2] * 9, log).side,
        pairs=8,
        order="random",
        seed=7,
        warmup=0,
        machine=machine([(0, 0, 0)] * 2),
    )
    assert r.seed == 7 and r.orders == [list(o) for o in ab.pair_orders(8, "random", 7)]
    assert r.to_dict()["seed"] == 7


def test_fewer_than_three_pairs_or_an_unknown_order_is_refused():
    s = ab.Side("x", lambda: 1.0)
    with pytest.raises(ValueError, match="at least 3"):
        ab.alternate(s, s, pairs=2)
    with pytest.raises(ValueError, match="order"):
        ab.pair_orders(3, "b-last")


def test_median_ratio_spread_and_order_statistic_interval():
    log: list[str] = []
    r = ab.alternate(
        Fake("a", [0, 10, 10, 10], log).side,
        Fake("b", [0, 12, 9, 15], log).side,
        pairs=3,
        machine=machine([(0.5, 0.4, 0.3), (1.5, 1.0, 0.5)]),
    )
    s = r.summary()
    assert s["ratio_b_over_a"] == pytest.approx([1.2, 0.9, 1.5])
    assert s["median_ratio"] == pytest.approx(1.2) and (s["min_ratio"], s["max_ratio"]) == pytest.approx((0.9, 1.5))
    assert s["interval"] == pytest.approx([0.9, 1.5]) and s["interval_coverage"] == 0.75  # 1 − 2·½³
    assert s["median_a"] == 10 and s["median_b"] == 12


@pytest.mark.parametrize(
    "n, k, coverage",
    [
        (5, 1, 1 - 2 / 32),
        (6, 1, 1 - 2 / 64),
        (10, 2, 1 - 2 * 11 / 1024),
        (20, 6, 1 - 2 * sum(__import__("math").comb(20, i) for i in range(6)) / 2**20),
    ],
)
def test_median_interval_is_the_exact_binomial_order_statistic_interval(n, k, coverage):
    values = [float(i) for i in range(n, 0, -1)]  # unsorted on purpose
    low, high, cov = ab.median_interval(values)
    assert (low, high) == (k, n + 1 - k) and cov == pytest.approx(coverage)
    assert n < 6 or cov >= 0.95


def test_a_zero_baseline_gives_no_ratio_rather_than_a_division_error():
    log: list[str] = []
    r = ab.alternate(
        Fake("a", [1, 0, 2, 2], log).side, Fake("b", [1, 5, 4, 6], log).side, machine=machine([(0, 0, 0)] * 2)
    )
    assert r.ratios() == [None, 2.0, 3.0] and r.summary()["median_ratio"] == 2.5


def test_load_average_and_cpu_flags_are_recorded_at_start_and_end():
    log: list[str] = []
    r = ab.alternate(
        Fake("a", [1] * 4, log).side,
        Fake("b", [1] * 4, log).side,
        machine=machine([(0.51234, 0.4, 0.3), (3.0, 2.0, 1.0)]),
    )
    d = r.to_dict()
    assert d["machine_start"]["load_average"] == [0.51, 0.4, 0.3] and d["machine_end"]["load_average"] == [3, 2, 1]
    assert isinstance(d["machine_start"]["cpu_flags"], list)
    assert "0.51" in "\n".join(ab.markdown(r, "tok/s")) and "[3.0, 2.0, 1.0]" in "\n".join(ab.markdown(r))
    assert set(ab.machine_now()) == {"load_average", "cpu_flags"} and len(ab.machine_now()["load_average"]) == 3


def test_window_rule_runs_waves_until_both_bounds_hold():
    calls = []

    def wave() -> ab.Wave:
        calls.append(1)
        return ab.Wave(units=100, seconds=2.0, counts={"failed": 1})

    m = ab.waves(wave, ab.WindowRule(min_waves=3, min_seconds=0))()
    assert (m.waves, m.units, m.seconds, m.figure, m.detail) == (3, 300, 6.0, 50.0, {"failed": 3})
    m = ab.waves(wave, ab.WindowRule(min_waves=1, min_seconds=9.0))()
    assert m.waves == 5 and m.seconds == 10.0  # 4 waves are 8 s < 9 s
    assert ab.WindowRule(min_waves=0).done(0, 0) is False  # a window is never empty


def test_markdown_names_the_first_side_of_each_pair():
    log: list[str] = []
    r = ab.alternate(
        Fake("old", [1, 10, 10, 10], log).side, Fake("new", [1, 20, 20, 20], log).side, machine=machine([(0, 0, 0)] * 2)
    )
    text = "\n".join(ab.markdown(r, "tok/s"))
    assert "| 1 | old | 10 | 20 | 2.000 |" in text and "| 2 | new | 10 | 20 | 2.000 |" in text
    assert "median **2.000×** over 3 pairs" in text and "75.0% interval" in text


@pytest.mark.parametrize(
    "value",
    [
        "/home/me/models/warm",
        "slca bench sft --model /srv/m",
        "~/models/x",
        "--out=/tmp/x",
        "C:\\Users\\me",
        os.getcwd() + "x",
        "(/scratch/run1)",
    ],
)
def test_machine_paths_are_found(value):
    assert ab.machine_paths({"k": [value]}) and ab.machine_paths({value: 1})


@pytest.mark.parametrize(
    "value",
    [
        "POST /v1/agent/runs",
        "http://127.0.0.1:8000/v1/chat/completions",
        "tokens/s",
        "sampled from /proc",
        "slca bench sft --model …/warm",
        "SmolLM2-135M",
        "1/2",
        "÷ vLLM",
    ],
)
def test_non_paths_pass(value):
    assert ab.machine_paths({"k": value}) == []


def test_write_refuses_machine_paths_and_writes_nothing(tmp_path):
    with pytest.raises(ab.MachinePathError, match="model"):
        ab.write(tmp_path / "out", {"model": "/models/warm"}, ["x"], "slca bench x")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ab.MachinePathError):
        ab.write(tmp_path / "out", {"model": "warm"}, ["wrote to /var/tmp/x"], "slca bench x")


def test_write_json_and_markdown_with_the_command(tmp_path):
    command = bench_command(
        "sft", ["slca", "bench", "sft", "--model", "/home/me/m/warm", "--out", "/x/y.json", "--pairs", "5"]
    )
    assert command == "slca bench sft --model …/warm --pairs 5"
    j, md = ab.write(tmp_path / "r.json", {"command": command, "model": model_name("/home/me/m/warm")}, ["t"], "T")
    assert (j, md) == (tmp_path / "r.json", tmp_path / "r.md")
    assert json.loads(j.read_text()) == {"command": command, "model": "warm"}
    assert md.read_text().startswith("# T\n\n- command: slca bench sft --model …/warm --pairs 5\n")
    j, md = ab.write(tmp_path / "dir", {"command": command}, ["t"], "T")
    assert j == tmp_path / "dir" / "results.json" and md.name == "table.md"


def test_bench_command_cuts_paths_inside_settings():
    argv = ["slca", "bench", "rl", "--pipeline-set", "common.model=/abs/m", "--out=/o", "--model=~/x/warm"]
    assert bench_command("rl", argv) == "slca bench rl --pipeline-set common.model=…/m --model=…/warm"


def test_a_resumed_run_keeps_the_done_windows_and_measures_only_the_missing_ones():
    log: list[str] = []
    first = ab.alternate(
        Fake("a", [10, 10, 10], log).side, Fake("b", [20, 40, 60], log).side, warmup=0, machine=machine([(0,) * 3] * 2)
    )
    kept = first.windows[:3]  # the run stopped inside pair 2 (B went first there, A had not run)
    log.clear()
    resumed = ab.alternate(
        Fake("a", [11, 12], log, warm=True).side,
        Fake("b", [99], log, warm=True).side,
        warmup=1,
        done=kept,
        machine=machine([(0,) * 3] * 2),
    )
    assert log == ["a:measure", "a:measure", "b:measure"]  # no warm-up again, the done windows not re-run
    assert resumed.figures("a") == [10, 11, 12] and resumed.figures("b") == [20, 40, 99]
    with pytest.raises(ValueError, match="not one of this run's windows"):
        ab.alternate(Fake("x", [1] * 3, log).side, Fake("b", [1] * 3, log).side, warmup=0, done=kept)


def test_a_result_survives_its_json_form():
    log: list[str] = []
    r = ab.alternate(
        Fake("a", [1, 2, 3], log).side, Fake("b", [2, 2, 2], log).side, warmup=0, machine=machine([(1,) * 3] * 2)
    )
    back = ab.ABResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.to_dict() == r.to_dict() and back.ratios() == [2.0, 1.0, 2 / 3]


def test_the_resume_log_gives_back_what_was_added_and_refuses_other_settings(tmp_path):
    path = ab.resume_path(tmp_path / "out", "rows.jsonl")
    assert path == tmp_path / "out" / "rows.jsonl" and ab.resume_path(tmp_path / "r.json", "x") == tmp_path / "x"
    first = ab.ResumeLog(path, {"clients": (1, 16), "pairs": 3})
    assert first.load() == []
    first.add({"row": 1})
    first.add({"row": 2})
    assert ab.ResumeLog(path, {"clients": [1, 16], "pairs": 3}).load() == [{"row": 1}, {"row": 2}]
    with pytest.raises(ab.ResumeError, match="other settings"):
        ab.ResumeLog(path, {"clients": [1, 16], "pairs": 4}).load()


def test_a_run_from_another_machine_is_not_resumed(tmp_path, monkeypatch):
    import ops.common.machine

    here = {"cpu": "A", "cores": 2, "cpu_flags": ["avx2"], "load_average_1m": 0.1, "python": "3.11"}
    monkeypatch.setattr(ops.common.machine, "machine_facts", lambda: here)
    ab.ResumeLog(tmp_path / "w.jsonl", {"pairs": 3, "machine": ab.machine_identity()}).add({"row": 1})
    here = {**here, "cpu_flags": ["avx2", "amx_bf16"], "load_average_1m": 3.0}
    with pytest.raises(ab.ResumeError, match="another machine"):
        ab.ResumeLog(tmp_path / "w.jsonl", {"pairs": 3, "machine": ab.machine_identity()}).load()


def test_report_writes_the_table_with_each_sides_figure_beside_it(tmp_path, capsys):
    a = ab.Side("A", lambda: ab.Measurement(10.0, detail={"rss": 5000}))
    b = ab.Side("B", lambda: ab.Measurement(8.0, detail={"rss": 2700}))
    result = ab.alternate(a, b, pairs=3, warmup=0)
    assert ab.per_side(result, "rss") == {"A": [5000] * 3, "B": [2700] * 3}
    ab.report(
        tmp_path / "out", {"command": "slca bench x"}, result, "tok/s", ("Peak:", ab.per_side(result, "rss")), "T"
    )
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["command"] == "slca bench x" and data["median_ratio"] == pytest.approx(0.8)
    table = (tmp_path / "out" / "table.md").read_text()
    assert "Peak:" in table and "- B: [2700, 2700, 2700]" in table
    assert "- A: [5000, 5000, 5000]" in capsys.readouterr().out


def test_bench_command_quotes_a_json_setting_so_a_shell_reads_it_back_as_typed():
    import shlex

    setting = 'ops.process_threads={"serve": 1, "learn": 1}'
    argv = ["slca", "bench", "rl", "--pipeline-set", "serve.engine=hf", "--pipeline-set", setting, "--out", "/o"]
    command = bench_command("rl", argv)
    assert shlex.split(command) == [
        "slca",
        "bench",
        "rl",
        "--pipeline-set",
        "serve.engine=hf",
        "--pipeline-set",
        setting,
    ]
