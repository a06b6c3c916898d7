"""The per-version reward curve of `slca up` (status line, binned table, files)."""

import json

from ops.online_curve import binned, by_version, status_lines, write_curve


def _rows():
    rows = []
    for version, execs in [(0, [0.2, 0.4]), (1, [0.5]), (3, [0.6, 0.8, 0.7])]:
        rows += [{"exec": e, "pref": 0.5, "tool_turns": 1.0, "policy_version": float(version), "ts": 100.0 + version}
                 for e in execs]  # fmt: skip
    rows.append({"exec": None, "pref": None, "tool_turns": None, "policy_version": 2.0, "ts": 1.0})  # unparsed row
    return rows


def test_by_version_means_counts_and_order():
    stats = by_version(_rows())
    assert [(s.version, s.n) for s in stats] == [(0, 2), (1, 1), (3, 3)]
    assert abs(stats[0].exec_mean - 0.3) < 1e-9 and abs(stats[2].exec_mean - 0.7) < 1e-9
    assert stats[1].exec_sem == 0.0 and stats[0].exec_sem > 0
    assert stats[0].first_s == 0.0 and stats[2].first_s == 3.0
    assert "v3 0.700 (n=3)" in status_lines(stats)


def test_binned_pools_versions_weighting_by_trajectories():
    pooled = binned(by_version(_rows()), bins=2)
    assert sum(b["n"] for b in pooled) == 6
    assert pooled[0]["versions"].startswith("v0")


def test_write_curve_files_have_no_machine_paths(tmp_path):
    out = tmp_path / "run"
    write_curve(by_version(_rows()), out, "make run", {"minutes": 1})
    data = json.loads((out / "results.json").read_text())
    assert data["command"] == "make run" and len(data["versions"]) == 3
    assert (out / "curve.png").stat().st_size > 1000 and str(tmp_path) not in (out / "results.md").read_text()
