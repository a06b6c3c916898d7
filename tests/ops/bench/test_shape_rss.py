"""`slca bench shape-rss`: each window is its own process with the capacity it was given (oneDNN reads the
variable once per process), and reports requests/s and its RSS samples."""

import argparse

from ops.bench.shape_rss import _window


def test_a_window_runs_a_fresh_engine_process_with_its_capacity(tiny_model_dir):
    args = argparse.Namespace(
        model=str(tiny_model_dir),
        engine="hf",
        requests=5,
        concurrency=2,
        every=2,
        min_len=5,
        max_len=40,
        max_tokens=2,
    )
    m = _window(args, 7, seed=3)
    assert m.units == 5 and m.seconds > 0 and m.figure == m.units / m.seconds
    assert m.detail["capacity"] == 7 and m.detail["seed"] == 3
    assert len(m.detail["rss_mib"]) >= 3  # at the start, at 2 and 4 requests, at the end
    assert all(r > 0 for r in m.detail["rss_mib"])
