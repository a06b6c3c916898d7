"""`slca bench online` on a Redis holding a run (the one `slca status` is tested on): the curve files, the probe's
v0 and latest per-item files and their paired summary."""

import json
from types import SimpleNamespace

from ops.observe.online import run_online_export
from tests.ops.run.test_status import run_in_redis


def test_bench_online_writes_curve_files_and_paired_summary(redis_url, tmp_path, capsys):
    config, entries = run_in_redis(redis_url, tmp_path)
    out = tmp_path / "bench"
    assert run_online_export(SimpleNamespace(out=out, command="make run", note=""), config) == 0
    assert "probe_summary.json, probe/" in capsys.readouterr().out
    summary = json.loads((out / "probe_summary.json").read_text())
    assert summary["source"] == "per-item files" and summary["paired"]["held_out"]["diff"] > 0.3
    assert sorted(p.name for p in (out / "probe").iterdir()) == ["v0.jsonl", "v60.jsonl"]
    assert {"results.json", "results.md", "curve.png"} <= {p.name for p in out.iterdir()}
