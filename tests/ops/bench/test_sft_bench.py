"""`slca bench sft`'s plan and report arithmetic without a model: one fixed example list for both loops,
passes timed as waves, the ratio per pair, the model's name (not its path) in the JSON."""

from __future__ import annotations

import itertools

import pytest

from ops.bench import ab
from ops.bench.sft import MIN_STEPS, fixed_list, loop_row, new_plan, old_plan, pass_wave, sft_report, warmup_steps


def test_both_loops_train_on_the_same_fixed_list_each_example_once_per_window():
    lengths = [100 + (37 * i) % 400 for i in range(300)]
    chosen = fixed_list(len(lengths), MIN_STEPS, 8, seed=3)
    assert len(chosen) == 80 == len(set(chosen)) and chosen == fixed_list(len(lengths), MIN_STEPS, 8, seed=3)
    old, new = old_plan(chosen, 8), new_plan(chosen, lengths, 8 * 300, seed=3)
    assert len(old) == MIN_STEPS and all(len(b) == 8 for b in old)
    assert sorted(itertools.chain(*old)) == sorted(itertools.chain(*new)) == sorted(chosen)
    assert new == new_plan(chosen, lengths, 8 * 300, seed=3)  # one plan, drawn once: every window the same
    assert len(fixed_list(5, MIN_STEPS, 8, seed=0)) == 5  # fewer demonstrations than the list: all of them


def fake_step(log):
    def step(indices):
        log.append(tuple(indices))
        return 10 * len(indices), 12 * len(indices), len(indices), 1.0

    return step


def test_a_pass_is_one_wave_over_the_whole_plan_timed_apart_from_warm_up():
    log, ticks = [], iter([0.0, 4.0])
    plan = [[0, 1], [2, 3], [4]]
    w = pass_wave(fake_step(log), plan, clock=lambda: next(ticks))()
    assert log == [(0, 1), (2, 3), (4,)] and (w.units, w.seconds) == (50, 4.0)
    assert w.counts == {"steps": 3, "real_tokens": 50, "padded_tokens": 60, "examples": 5, "step_seconds": 4.0}
    warm = []
    warmup_steps(fake_step(warm), plan, 4)()
    assert warm == [(0, 1), (2, 3), (4,), (0, 1)]


def window(pair, side, figure, steps, seconds, real, padded, examples):
    return ab.Window(
        pair,
        0,
        side,
        figure,
        real,
        seconds,
        1,
        {"steps": steps, "step_seconds": seconds, "real_tokens": real, "padded_tokens": padded, "examples": examples},
    )


def test_report_ratio_is_the_median_of_pairs_and_loops_are_summed_over_windows():
    windows = [
        window(0, "old", 100, 10, 10.0, 1000, 1200, 80),
        window(0, "new", 200, 8, 5.0, 1000, 1010, 80),
        window(1, "new", 150, 8, 6.0, 1000, 1010, 80),
        window(1, "old", 100, 10, 10.0, 1000, 1200, 80),
        window(2, "old", 50, 10, 20.0, 1000, 1200, 80),
        window(2, "new", 200, 8, 5.0, 1000, 1010, 80),
    ]
    machine = {"load_average": [1, 1, 1], "cpu_flags": []}
    result = ab.ABResult(
        "old", "new", 3, "alternate", None, [["A", "B"], ["B", "A"], ["A", "B"]], 1, windows, machine, machine
    )
    report = sft_report(result, {"command": "slca bench sft", "model": "SmolLM2-135M"})
    assert report["ab"]["ratio_b_over_a"] == [2.0, 1.5, 4.0] and report["ratio"]["tokens_per_s"] == 2.0
    old, new = report["loops"]["old"], report["loops"]["new"]
    assert (old["steps"], old["seconds"], old["real_tokens"]) == (30, 40.0, 3000)
    assert old["tokens_per_s"] == pytest.approx(75.0) and new["s_per_step"] == pytest.approx(16 / 24)
    assert report["ratio"]["padding_share"] == pytest.approx((1 - 3000 / 3030) / (1 - 3000 / 3600))
    assert ab.machine_paths(report) == []
    assert loop_row([])["steps"] == 0


def test_the_written_json_carries_the_model_name_not_its_path(tmp_path):
    from ops.bench.common import model_name

    assert model_name("/home/me/.cache/slca/models/SmolLM2-135M") == "SmolLM2-135M"
    with pytest.raises(ab.MachinePathError):
        ab.write(tmp_path / "s.json", {"model": "/home/me/.cache/slca/models/SmolLM2-135M"}, [], "slca bench sft")
