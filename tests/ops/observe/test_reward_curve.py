"""The per-version reward curve of `slca up` (status line, binned table, files)."""

import json

import pytest

from ops.observe.reward_curve import binned, by_version, status_lines, write_curve


def _rows():
    rows = []
    for version, execs in [(0, [0.2, 0.4]), (1, [0.5]), (3, [0.6, 0.8, 0.7])]:
        rows += [
            {"exec": e, "pref": 0.5, "tool_turns": 1.0, "policy_version": float(version), "ts": 100.0 + version}
            for e in execs
        ]
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


def synthetic_rounds(data_dir):
    """Three probe rounds as the probe leaves them (files under `data_dir`, summaries as published): 20 test
    and 10 novel tasks and 10 BFCL items; v0 solves 8 + 3 + 4, v30 (a swap mid-round: v30–v31) 12 + 4 + 4, v60
    15 + 5 + 5 with one request failed."""
    from ops.experiments.eval.suite import ItemRecord
    from ops.observe.probe_rounds import RoundFiles, summarise_round

    def records(version, solved, failed=()):
        out = []
        for suite, n, k in (("test", 20, solved[0]), ("novel", 10, solved[1]), ("bfcl:simple_python", 10, solved[2])):
            for i in range(n):
                bfcl = suite.startswith("bfcl")
                out.append(
                    ItemRecord(
                        suite,
                        f"{suite}-{i}",
                        success=i < k,
                        exec=None if bfcl else float(i < k),
                        pref=None if bfcl else 0.25,
                        policy_version=version + (i % 2 if version else 0),
                        calls=[{"name": "f", "arguments": {}, "valid": True, "turn": 0}],
                        error="HTTP 503" if (suite, i) in failed else None,
                    )
                )
        return out

    files, entries, base = RoundFiles(data_dir), [], None
    for version, solved, failed in ((0, (8, 3, 4), ()), (30, (12, 4, 4), ()), (60, (15, 5, 5), {("test", 19)})):
        recs = records(version, solved, failed)
        r = summarise_round(recs, base, 0 if base else None, 0.0, "greedy", version)
        files.write(r, recs)
        base = base or recs
        entries.append(r.to_json())
    return entries


def test_status_lines_lead_with_the_paired_difference_from_v0(tmp_path):
    from ops.observe.probe_report import probe_lines

    entries = synthetic_rounds(tmp_path)
    text = probe_lines([{"version": 0, "exec_mean": 0.5, "success": 0.5}, *entries])  # the sampled probe's: skipped
    lines = text.splitlines()
    assert lines[0].startswith("held-out probe (greedy, 40 items;")
    # the headline: the latest round (v60–v61, median v60) paired with v0 per suite, the failed item left out
    assert lines[1].startswith(
        "  v0 → v60: held-out +0.310 [+0.138, +0.483] p=0.00391 (+9/−0 of 29) | test +0.368 ["
    ), lines[1]
    assert "| novel +0.200 [" in lines[1] and "| BFCL +0.100 [" in lines[1]
    first = "  v0 | held-out 0.367 [0.219, 0.545] n=30 | BFCL 0.400 [0.168, 0.687] n=10 | exec 0.367 pref 0.250"
    assert lines[2] == first + " turns 1.00"
    assert (
        lines[3].startswith("  v30 (v30–v31) | held-out 0.533 [0.361, 0.698] n=30 |") and "vs v0 +0.167 [" in lines[3]
    )
    assert lines[4].endswith("(+9/−0 of 29) | 1 failed requests left out")
    assert probe_lines([]) == "held-out probe: no round yet"


def test_bench_online_copies_v0_and_latest_files_and_writes_the_paired_summary(tmp_path):
    from ops.experiments.eval.suite import read_jsonl

    entries = synthetic_rounds(tmp_path / "var")
    out = tmp_path / "run"
    result = write_curve(by_version(_rows()), out, "make run", {"minutes": 1}, probe=entries, data_dir=tmp_path / "var")
    latest = entries[-1]["records"]
    assert sorted(p.name for p in (out / "probe").iterdir()) == ["v0.jsonl", latest.split("/")[-1]]
    assert len(read_jsonl(out / latest)) == 40
    summary = json.loads((out / "probe_summary.json").read_text())
    assert summary == result["probe_paired"] and summary["source"] == "per-item files"
    assert list(summary["paired"])[:4] == ["held_out", "test", "novel", "bfcl"]
    held = summary["paired"]["held_out"]  # the failed item is left out of both sides
    assert held["n"] == 29 and held["b_only"] == 9 and held["a_only"] == 0 and held["mcnemar_p"] < 0.01
    assert (
        held["ci_low"] > 0 and summary["latest"]["held_out"]["n"] == 29 and summary["baseline"]["held_out"]["n"] == 30
    )
    md = (out / "results.md").read_text()
    assert "| v0 | v0–v0 | 0.367 [0.219, 0.545] |" in md and "baseline |" in md and "- novel: +0.200 [" in md
    assert "- held-out: +0.310 [+0.138, +0.483] p=0.00391 (+9/−0 of 29)" in md
    assert str(tmp_path) not in md and str(tmp_path) not in (out / "probe_summary.json").read_text()
    assert [r["version"] for r in json.loads((out / "results.json").read_text())["probe"]] == [0, 30, 60]
    # the verdict comes first, computed by the stated rule: +0.310 with its interval above 0, BFCL not below
    assert md.splitlines()[2].startswith(
        "**Verdict** (paired held-out probe, rule in `ops/observe/probe_report.py`): "
        "held-out success rose v0 → v60: +0.310 [+0.138, +0.483]"
    ), md
    # the 90-minute target needs the training-task probe, which these rounds did not ask
    assert (
        "target (train-probe ≥ +0.10 and test ≥ +0.08, each with the interval above 0; novel and BFCL not worse "
        "than -0.05) not met (train-probe not asked); judged v60 (periodic round)" in result["verdict"]
    ), result["verdict"]


def _row(diff, lo, hi):
    return {"diff": diff, "ci_low": lo, "ci_high": hi, "n": 100, "mcnemar_p": 0.5, "a_only": 1, "b_only": 1}


def _paired(diff, lo, hi, bfcl=(0.0, -0.04, 0.04), train=None, test=None, novel=(0.0, -0.04, 0.04)):
    paired = {"held_out": _row(diff, lo, hi), "bfcl": _row(*bfcl), "novel": _row(*novel)}
    paired |= {"train_probe": _row(*train)} if train else {}
    paired |= {"test": _row(*test)} if test else {}
    return {"rounds": 2, "baseline_version": 0, "latest_version": 40, "paired": paired}


@pytest.mark.parametrize(
    "summary, expected",
    [
        (None, "not judged"),
        ({"rounds": 1, "baseline_version": 0, "latest_version": 0}, "not judged"),
        (_paired(0.03, -0.01, 0.07), "did not measurably change v0 → v40"),
        (_paired(0.03, 0.01, 0.05), "rose v0 → v40"),
        (_paired(-0.06, -0.1, -0.02), "fell v0 → v40"),
    ],
)
def test_verdict_follows_the_stated_rule(summary, expected):
    from ops.observe.probe_report import verdict

    text = verdict(summary)
    assert expected in text and (text.startswith("not judged") or (" not met (" in text and "; judged v40" in text))


def test_verdict_target_needs_train_probe_and_test_gains_and_novel_and_bfcl_not_worse():
    from ops.observe.probe_report import verdict

    good = dict(train=(0.12, 0.04, 0.2), test=(0.09, 0.01, 0.17))
    assert verdict(_paired(0.06, 0.01, 0.11, **good)).split("; judged")[0].endswith(" met")
    # each condition alone turns it: a gain below its size, an interval touching 0, a suite not asked, novel or
    # BFCL worse than -0.05 at the low end of the interval
    for change, miss in [
        (dict(train=(0.08, 0.02, 0.14)), "train-probe +0.080 (needs ≥ +0.10"),
        (dict(test=(0.09, -0.01, 0.19)), "test +0.090 (needs ≥ +0.08"),
        (dict(test=None), "test not asked"),
        (dict(novel=(0.0, -0.07, 0.07)), "novel interval reaches -0.070"),
        (dict(bfcl=(-0.2, -0.3, -0.1)), "BFCL interval reaches -0.300"),
    ]:
        text = verdict(_paired(0.06, 0.01, 0.11, **(good | change)))
        assert " not met (" in text and miss in text, (change, text)
    assert "(fell)" in verdict(_paired(0.06, 0.01, 0.11, **good, bfcl=(-0.2, -0.3, -0.1)))


def test_bench_online_without_the_round_files_reports_the_streams_comparison(tmp_path):
    entries = synthetic_rounds(tmp_path / "var")
    write_curve(by_version(_rows()), tmp_path / "run", "make run", {}, probe=entries, data_dir=tmp_path / "elsewhere")
    summary = json.loads((tmp_path / "run" / "probe_summary.json").read_text())
    assert summary["source"].startswith("probe stream") and summary["files"] == {}
    assert summary["paired"]["held_out"] == entries[-1]["vs_v0"]["held_out"]
