"""`slca bench learning` pieces: the plot draws every estimator's curve, the table has one row per model,
the final weights are the newest complete version."""

import json

from ops.learning_bench import final_weights, plot, read_jsonl, results_table

SCORES = {"indomain": {"n": 2, "name_f1": 0.5, "argument_match": 0.25, "success": 0.0, "tool_turns": 1.0},
          "bfcl": {"simple_python": 0.5, "multiple": 0.0, "parallel": 0.0, "parallel_multiple": 0.0,
                   "irrelevance": 1.0, "overall": 0.3}}  # fmt: skip


def test_plot_has_a_curve_per_estimator(tmp_path):
    from matplotlib.image import imread

    curves = {}
    for i, est in enumerate(["slca", "grpo"]):
        path = tmp_path / f"{est}.jsonl"
        path.write_text("".join(json.dumps({"step": s, "exec_mean": 0.1 * s + i, "pref_mean": 0.5,
                                            "tool_turns_mean": 1.0}) + "\n" for s in range(1, 6)))  # fmt: skip
        curves[est] = read_jsonl(path)
    plot(curves, tmp_path / "p.png", "test")
    pixels = imread(tmp_path / "p.png")[:, :, :3]
    blue = ((abs(pixels - [0x1F / 255, 0x77 / 255, 0xB4 / 255]).max(axis=2)) < 0.05).sum()
    orange = ((abs(pixels - [1.0, 0x7F / 255, 0x0E / 255]).max(axis=2)) < 0.05).sum()
    assert blue > 100 and orange > 100  # matplotlib's first two colours: one per estimator


def test_results_table_and_failed_run():
    table = results_table({"start": SCORES, "slca": SCORES, "grpo": None}, {"slca": {"seconds": 12.5}})
    lines = table.splitlines()
    assert len(lines) == 5 and "| start | 0.000 | 0.500 | 0.250 | 1.00 |" in lines[2]
    assert "12.5" in lines[3] and "training failed" in lines[4]


def test_final_weights_is_the_newest_complete_version(tmp_path):
    for v in (1, 2, 10):
        (tmp_path / f"v{v}").mkdir()
    for v in (1, 2):
        (tmp_path / f"v{v}" / "config.json").write_text("{}")
    (tmp_path / "v10.tmp").mkdir()
    assert final_weights(tmp_path) == tmp_path / "v2"
    assert final_weights(tmp_path / "missing") is None
