"""What judges a run: the feed's exec trend with its error clustered by version (a synthetic run whose versions
each shift every trajectory together: the naive error is far too small, the clustered one is not); the verdict
naming the version it judged; periodic rounds of the training-task probe beside the full rounds; the probe's cost
as a share of the serving time; the last served version judged pinned when no round did."""

import json
import math
import random
from types import SimpleNamespace

import pytest

from ops.experiments.eval.suite import ItemRecord
from ops.observe.final_round import judge_last_version, judged, last_served_version
from ops.observe.probe_report import cost_line, paired_summary, probe_cost, probe_lines, rounds_of, verdict
from ops.observe.probe_rounds import RoundFiles, summarise_round
from ops.observe.reward_curve import by_version, trend


def _naive_se(rows) -> float:
    """Ordinary least squares over trajectories, each its own observation."""
    xs = [r["policy_version"] for r in rows]
    ys = [r["exec"] for r in rows]
    n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    resid = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys))
    return math.sqrt(resid / (n - 2) / sxx)


def _run(rng: random.Random, versions=30, per_version=20, shift_sd=0.12, noise_sd=0.2):
    """No learning (slope 0), but each version moves all its trajectories together (its weights, its tasks)."""
    rows = []
    for v in range(0, 10 * versions, 10):
        shift = rng.gauss(0, shift_sd)
        rows += [
            {"exec": 0.5 + shift + rng.gauss(0, noise_sd), "policy_version": v, "ts": 0.0} for _ in range(per_version)
        ]
    return rows


def test_the_trend_error_is_clustered_by_version():
    rng = random.Random(35)
    slopes, clustered, naive = [], [], []
    for _ in range(200):
        rows = _run(rng)
        t = trend(by_version(rows))
        slopes.append(t["slope_per_100_versions"] / 100)
        clustered.append(t["se_per_100_versions"] / 100)
        naive.append(_naive_se(rows))
    sd = math.sqrt(sum(s * s for s in slopes) / len(slopes))  # the true slope is 0
    # the naive error is well under half the slope's real spread; the clustered one is close to it
    assert sum(naive) / len(naive) < 0.5 * sd
    assert 0.8 * sd < sum(clustered) / len(clustered) < 1.2 * sd
    cover = sum(abs(s) < 2 * se for s, se in zip(slopes, clustered)) / len(slopes)
    cover_naive = sum(abs(s) < 2 * se for s, se in zip(slopes, naive)) / len(slopes)
    assert cover > 0.88 and cover_naive < 0.7


def test_the_trend_matches_least_squares_over_trajectories():
    rows = _run(random.Random(1), versions=5, per_version=7)
    xs, ys = [r["policy_version"] for r in rows], [r["exec"] for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    t = trend(by_version(rows))
    assert t["slope_per_100_versions"] == pytest.approx(100 * b) and t["versions"] == 5 and t["points"] == 35
    assert trend(by_version(rows[:14])) is None  # two versions: no error to give


def _records(version, solved: dict[str, int], sizes=None) -> list[ItemRecord]:
    sizes = sizes or {"test": 20, "train_probe": 10, "bfcl:simple_python": 10}
    out = []
    for suite, n in sizes.items():
        for i in range(n):
            bfcl = suite.startswith("bfcl")
            out.append(
                ItemRecord(
                    suite,
                    f"{suite}-{i}",
                    success=i < solved.get(suite, 0),
                    exec=None if bfcl else float(i < solved.get(suite, 0)),
                    pref=None if bfcl else 0.5,
                    policy_version=version,
                )
            )
    return out


def _rounds(data_dir, final_at=None):
    """A baseline at v0 (every item), periodic rounds of the training-task probe at v20 and v40, and optionally a
    final round (every item) at `final_at`."""
    files, entries = RoundFiles(data_dir), []
    base = _records(0, {"test": 5, "train_probe": 2, "bfcl:simple_python": 4})
    r0 = summarise_round(base, None, None, 0.0, "greedy", 0, kind="baseline")
    r0.probe_s, r0.run_s = 100.0, 100.0
    plan = [(r0, base)]
    for v, probe_s, run_s, k in ((20, 140.0, 1300.0, 6), (40, 180.0, 2500.0, 8)):
        recs = _records(v, {"train_probe": k}, sizes={"train_probe": 10})
        r = summarise_round(recs, base, 0, 0.0, "greedy", v)
        r.probe_s, r.run_s = probe_s, run_s
        plan.append((r, recs))
    if final_at is not None:
        recs = _records(final_at, {"test": 12, "train_probe": 9, "bfcl:simple_python": 4})
        r = summarise_round(recs, base, 0, 0.0, "greedy", final_at, kind="final")
        r.probe_s, r.run_s, r.seconds = 180.0, 3600.0, 300.0
        plan.append((r, recs))
    for r, recs in plan:
        files.write(r, recs)
        entries.append(r.to_json())
    return entries


def test_periodic_rounds_are_shown_and_the_verdict_judges_the_final_round(tmp_path):
    rounds = rounds_of(_rounds(tmp_path / "var", final_at=46))
    summary = paired_summary(rounds, tmp_path / "var", tmp_path / "out", last_served=46)
    assert summary["latest_version"] == 46 and summary["latest_kind"] == "final"
    assert sorted(summary["files"].values()) == ["probe/v0.jsonl", "probe/v46-final.jsonl"]
    text = verdict(summary)
    assert text.startswith("held-out success rose v0 → v46: +0.350 [")
    assert "; train-probe +0.700 [" in text and text.endswith("; judged v46 (final round, the last served version)")
    lines = probe_lines([r.to_json() for r in rounds])
    assert "  v20 | train-probe 0.600 [" in lines and "vs v0 +0.400 [" in lines and "final |" not in lines


def test_the_verdict_says_when_the_last_served_version_was_not_judged(tmp_path):
    rounds = rounds_of(_rounds(tmp_path / "var"))  # no final round: the latest full one is the baseline
    summary = paired_summary(rounds, tmp_path / "var", tmp_path / "out", last_served=52)
    assert verdict(summary).endswith("; judged v0 (baseline round); the last served version v52 was not judged")


def test_the_probes_share_of_the_whole_runs_serving_time_is_reported(tmp_path):
    """The whole run: every round's seconds (the final round's, after training stopped, included and also shown
    apart) over the serving time up to the final round's end — not the last periodic round's numbers, which left
    out the final round and the serving after the last periodic round (one run printed 10.9% of 70 min for a run
    that served 90)."""
    rounds = rounds_of(_rounds(tmp_path / "var", final_at=46))
    # the final round: 180 s of earlier rounds at its start, its own 300 s, 3600 s of serving at its end
    assert probe_cost(rounds) == {
        "probe_s": 480.0,
        "run_s": 3600.0,
        "share": 0.1333,
        "rounds": 4,
        "final_counted": True,
        "to_last_round": False,
        "training_probe_s": 180.0,
        "training_s": 3300.0,
        "training_share": 0.0545,
        "training_rounds": 3,
        "final_s": 300.0,
        "final_pinned": False,
    }
    assert cost_line(rounds) == (
        "  probe cost: 13.3% of serving time (480 s of 60.0 min, 4 rounds, the final round's 300 s after training "
        "stopped included); while training 5.5% (180 s of 55.0 min, 3 rounds)"
    )
    assert cost_line(rounds) in probe_lines([r.to_json() for r in rounds]).splitlines()


def test_without_a_final_round_in_the_run_the_cost_says_it_reaches_the_last_round_only(tmp_path):
    rounds = rounds_of(_rounds(tmp_path / "var"))
    cost = probe_cost(rounds)
    assert (cost["probe_s"], cost["run_s"], cost["share"], cost["rounds"]) == (180.0, 2500.0, 0.072, 3)
    assert cost["to_last_round"] and not cost["final_counted"] and cost["final_s"] is None
    assert cost_line(rounds) == (
        "  probe cost: 7.2% of serving time up to the last round (180 s of 41.7 min, 3 rounds; the serving after it "
        "not counted)"
    )
    # `slca bench online`'s pinned final round runs after the run on a server of its own: not serving time
    pinned = rounds_of(_rounds(tmp_path / "var2", final_at=46))
    pinned[-1].pinned, pinned[-1].probe_s, pinned[-1].run_s = True, 0.0, 0.0
    assert probe_cost(pinned)["share"] == 0.072 and probe_cost(pinned)["final_pinned"]
    assert cost_line(pinned).endswith("; final round 300 s pinned after the run, not counted")


def test_the_last_served_version_is_judged_pinned_when_no_round_did(tmp_path):
    from slca.config import load_config

    data_dir = tmp_path / "var"
    rounds = rounds_of(_rounds(data_dir))
    rewards = [{"policy_version": v} for v in (3, 51, 50)]
    assert last_served_version(rewards, rounds) == 51 and not judged(rounds, 51) and judged(rounds, 0)
    config = load_config(None, [f"common.data_dir={data_dir}"])
    assert judge_last_version(config, rounds, 51, evaluate=None) is None  # no weights/v51 on disk: not judged
    (data_dir / "weights" / "v51").mkdir(parents=True)
    asked = []

    def evaluate(config, model_dir, plan, engine, items):
        asked.append((model_dir.name, engine, len(items)))
        return SimpleNamespace(records=_records(0, {"test": 15, "train_probe": 10}))  # the pinned server says v0

    final = judge_last_version(config, rounds, 51, evaluate=evaluate)
    assert asked[0][:2] == ("v51", "vllm") and asked[0][2] > 300  # every probe item of the settings' plan
    assert (
        final.kind == "final" and final.pinned and (final.version, final.version_min, final.version_max) == (51, 51, 51)
    )
    assert final.vs_v0["held_out"]["diff"] == pytest.approx(0.5) and final.baseline_version == 0
    assert (data_dir / "probe" / "v51-final.jsonl").is_file()
    assert judge_last_version(config, [*rounds, final], 51, evaluate=evaluate) is None and len(asked) == 1
    summary = paired_summary([*rounds, final], data_dir, tmp_path / "out", last_served=51)
    assert verdict(summary).endswith("; judged v51 (final round, pinned, the last served version)")
    assert json.loads((tmp_path / "out" / "probe_summary.json").read_text())["latest_pinned"] is True
