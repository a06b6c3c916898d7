"""`slca bench swap-compare`: the growth per swap of each run, grouped by the arm key of its results."""

import json

from ops.bench.swap.compare import run_row, slope, summarise


def test_slope_is_the_least_squares_growth_per_step():
    assert slope([10.0, 12.0, 14.0, 16.0]) == 2.0 and slope([5.0, 5.0]) == 0.0 and slope([1.0]) == 0.0


def test_runs_are_grouped_by_their_arm(tmp_path):
    for name, trim, rss in (("a", False, [100, 110, 120, 130, 140]), ("b", True, [100, 101, 100, 100, 100])):
        (tmp_path / name).mkdir()
        result = {"serve_rss_mib": rss, "versions": 4, "latency_p50_s": 2.0, "failed": 0, "failed_swaps": 0,
                  "serve_heap_trim_after_swap": trim}  # fmt: skip
        (tmp_path / name / "results.json").write_text(json.dumps(result))
    rows = [run_row(tmp_path / n, "serve_heap_trim_after_swap") for n in ("a", "b")]
    summary = summarise(rows)
    assert summary["False"]["growth_per_swap_mib"]["mean"] == 10.0 and summary["False"]["runs"] == 1
    assert summary["True"]["growth_per_swap_mib"]["mean"] == 0.0
    assert summary["False"]["second_half_slope_mib"]["mean"] == 10.0
