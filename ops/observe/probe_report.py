"""The probe's rounds for people: `slca status` lines, and what `slca bench online` writes about them (the
per-item files of v0 and the latest round that asked every item, the paired v0 → latest result per suite, a
Markdown table, a chart panel). The headline everywhere: held-out success with its 95% interval, and the paired
difference from v0 with its bootstrap 95% interval and McNemar p — the training-task probe, exec and pref beside
it — and what the probe cost: its share of the run's serving time.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ops.observe.probe_rounds import HEADLINE, PAIRED_SUITES, ProbeRound
from ops.experiments.eval.stats import TRAIN_PROBE

SUMMARY_FILE = "probe_summary.json"
LABELS = {"held_out": "held-out", "bfcl": "BFCL", "train_probe": "train-probe"}
"""How the pooled suites read in text."""


def rounds_of(entries: list[dict[str, Any]]) -> list[ProbeRound]:
    """Stream entries → rounds, oldest first; entries of the sampled probe (schema 1) and malformed ones are
    skipped."""
    return [r for r in map(ProbeRound.from_json, entries) if r is not None]


def _num(v: float | None, digits: int = 3, sign: bool = False) -> str:
    return "-" if v is None else format(v, f"{'+' if sign else ''}.{digits}f")


def rate(row: dict[str, Any] | None) -> str:
    """'0.620 [0.551, 0.684]': a success rate and its 95% interval."""
    if not row:
        return "-"
    return f"{_num(row.get('success'))} [{_num(row.get('ci_low'))}, {_num(row.get('ci_high'))}]"


def difference(d: dict[str, Any] | None) -> str:
    """'+0.084 [+0.021, +0.147] p=0.012 (+21/−5 of 190)': a paired difference, its interval, McNemar p, the
    items gained and lost."""
    if not d or not d.get("n"):
        return "-"
    return (
        f"{_num(d['diff'], sign=True)} [{_num(d['ci_low'], sign=True)}, {_num(d['ci_high'], sign=True)}] "
        f"p={d['mcnemar_p']:.3g} (+{d['b_only']}/−{d['a_only']} of {d['n']})"
    )


GAINS = {TRAIN_PROBE: 0.10, "test": 0.08}
"""The target of a 90-minute `make run` (issue 35), fixed before its run: the paired difference from v0 of each of
these suites at least this large, its 95% interval above 0 (+8 points is what 117 test items can detect)."""
NOT_WORSE = {"novel": -0.05, "bfcl": -0.05}
"""... and each of these suites not worse: the lower end of its paired interval above this."""


def target_misses(paired: dict[str, Any]) -> list[str]:
    """What keeps the run from its target, one phrase per suite (empty: met). A suite the rounds did not ask is a
    miss: the target cannot be met on items nobody evaluated."""
    misses = []
    for name, gain in GAINS.items():
        d = paired.get(name)
        if not d or not d.get("n"):
            misses.append(f"{LABELS.get(name, name)} not asked")
        elif d["diff"] < gain or d["ci_low"] <= 0:
            misses.append(f"{LABELS.get(name, name)} {_num(d['diff'], sign=True)} (needs ≥ +{gain:.2f}, interval > 0)")
    for name, floor in NOT_WORSE.items():
        d = paired.get(name)
        if d and d.get("n") and d["ci_low"] <= floor:
            misses.append(f"{LABELS.get(name, name)} interval reaches {_num(d['ci_low'], sign=True)}")
    return misses


def _target_rule() -> str:
    gains = " and ".join(f"{LABELS.get(n, n)} ≥ +{g:.2f}" for n, g in GAINS.items())
    floors = " and ".join(LABELS.get(n, n) for n in NOT_WORSE)
    return f"target ({gains}, each with the interval above 0; {floors} not worse than {min(NOT_WORSE.values()):+.2f})"


def verdict(summary: dict[str, Any] | None) -> str:
    """One sentence, computed from the paired v0 → latest result, that `slca bench online` writes first. The rule
    is fixed here, before any run: held-out rose when the bootstrap interval of the paired difference lies above
    0, fell when it lies below, else no measurable change; the target is met when every suite of `GAINS` rose by
    its gain with its interval above 0 and no suite of `NOT_WORSE` may be worse than its floor. It ends with the
    version it judged (and says so when that is not the last served one)."""
    if not summary or summary.get("rounds", 0) < 2 or summary["baseline_version"] == summary["latest_version"]:
        return "not judged: fewer than two probe rounds, so there is no paired comparison with v0" + _judged(summary)
    paired = summary.get("paired") or {}
    head, bfcl = paired.get(HEADLINE), paired.get("bfcl")
    if not head or not head.get("n"):
        return "not judged: the rounds share no held-out item" + _judged(summary)
    span = f"v{summary['baseline_version']} → v{summary['latest_version']}"
    if head["ci_low"] > 0:
        moved = "rose"
    elif head["ci_high"] < 0:
        moved = "fell"
    else:
        moved = "did not measurably change"
    bfcl_fell = bool(bfcl and bfcl.get("n") and bfcl["ci_high"] < 0)
    misses = target_misses(paired)
    bfcl_text = "-" if not bfcl or not bfcl.get("n") else difference(bfcl)
    train = paired.get(TRAIN_PROBE)
    train_text = f"train-probe {difference(train)}; " if train and train.get("n") else ""
    return (
        f"held-out success {moved} {span}: {difference(head)}; {train_text}BFCL {bfcl_text}"
        f"{' (fell)' if bfcl_fell else ''}; {_target_rule()} "
        f"{'not met (' + '; '.join(misses) + ')' if misses else 'met'}" + _judged(summary)
    )


def _judged(summary: dict[str, Any] | None) -> str:
    """'; judged v46 (final round, the last served version)', or which served version was not judged."""
    if not summary or summary.get("latest_version") is None:
        return ""
    version, kind = summary["latest_version"], summary.get("latest_kind", "periodic")
    how = f"{kind} round" + (", pinned" if summary.get("latest_pinned") else "")
    served = summary.get("last_served_version")
    if served is None:
        return f"; judged v{version} ({how})"
    if served == version and summary.get("latest_versions", [version, version]) == [version, version]:
        return f"; judged v{version} ({how}, the last served version)"
    return f"; judged v{version} ({how}); the last served version v{served} was not judged"


def round_line(r: ProbeRound) -> str:
    head = r.headline
    span = f" (v{r.version_min}–v{r.version_max})" if r.version_min != r.version_max else ""
    bfcl, train = r.suites.get("bfcl"), r.suites.get(TRAIN_PROBE)
    cells = [f"v{r.version}{span}"]
    if HEADLINE in r.suites:
        cells.append(f"held-out {rate(head)} n={head.get('n', 0)}")
    if train:
        cells.append(f"train-probe {rate(train)} n={train['n']}")
    if bfcl:
        cells.append(f"BFCL {rate(bfcl)} n={bfcl['n']}")
    cells.append(f"exec {_num(head.get('exec'))} pref {_num(head.get('pref'))} turns {_num(head.get('tool_turns'), 2)}")
    if r.version != r.baseline_version:
        cells.append(f"vs v{r.baseline_version} {difference(r.vs_v0.get(r.headline_suite))}")
    if r.kind != "periodic" or r.cached:
        cells.append(r.kind + (" (cached)" if r.cached else ""))
    if r.failed_requests:
        cells.append(f"{r.failed_requests} failed requests left out")
    return "  " + " | ".join(cells)


def probe_lines(entries: list[dict[str, Any]], last: int = 6) -> str:
    """`slca status`: the headline (latest round vs v0, per suite), then the latest rounds."""
    rounds = rounds_of(entries)
    if not rounds:
        return "held-out probe: no round yet"
    latest = rounds[-1]
    lines = [
        f"held-out probe ({latest.mode}, {latest.items} items; success with 95% interval, paired vs "
        f"v{latest.baseline_version} with bootstrap 95% interval and McNemar p):"
    ]
    if latest.version != latest.baseline_version:
        cells = [
            f"{LABELS.get(name, name)} {difference(latest.vs_v0[name])}"
            for name in PAIRED_SUITES
            if name in latest.vs_v0
        ]
        lines.append(f"  v{latest.baseline_version} → v{latest.version}: " + " | ".join(cells))
    lines += [round_line(r) for r in rounds[-last:]]
    if cost := cost_line(rounds):
        lines.append(cost)
    return "\n".join(lines)


def probe_cost(rounds: list[ProbeRound]) -> dict[str, Any] | None:
    """The probe's cost over the whole run, from what each round records (`ProbeRound.probe_s`: the feed's probe
    seconds so far, dropped rounds included, a final round's own not; `run_s`: the serving seconds since the first
    readiness, at the round's end; `seconds`: the round's own).

    With a final round run by the feed at the stop, the run's whole serving time is that round's `run_s` (it ends
    last), and the probe's seconds are every earlier round's (its `probe_s`) plus its own: `probe_s` of `run_s`
    (`share`), the final round counted (`final_counted`) and also reported apart (`final_s`). Without one (none was
    run, or `slca status` while the run goes on) the numbers reach the last round only (`to_last_round`): the serving
    after it is not known from the rounds. `training_*`: the same while training ran, up to the final round's start.
    A pinned final round (`slca bench online`'s, on a server of its own after the run) is not serving time: its
    seconds are reported apart, not counted."""
    during = [r for r in rounds if r.kind != "final" and r.run_s > 0]
    finals = [r for r in rounds if r.kind == "final"]
    final = finals[-1] if finals else None
    in_run = final if final is not None and not final.pinned and final.run_s > 0 else None
    if in_run is not None:
        training_probe_s, training_s = in_run.probe_s, max(in_run.run_s - in_run.seconds, 0.0)
        probe_s, run_s = in_run.probe_s + in_run.seconds, in_run.run_s
    elif during:
        training_probe_s, training_s = during[-1].probe_s, during[-1].run_s
        probe_s, run_s = training_probe_s, training_s
    else:
        return None
    return {
        "probe_s": round(probe_s, 1),
        "run_s": round(run_s, 1),
        "share": round(probe_s / run_s, 4) if run_s > 0 else None,
        "rounds": len(during) + (in_run is not None),
        "final_counted": in_run is not None,
        "to_last_round": in_run is None,
        "training_probe_s": round(training_probe_s, 1),
        "training_s": round(training_s, 1),
        "training_share": round(training_probe_s / training_s, 4) if training_s > 0 else None,
        "training_rounds": len(during),
        "final_s": round(final.seconds, 1) if final is not None else None,
        "final_pinned": bool(final is not None and final.pinned),
    }


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def cost_line(rounds: list[ProbeRound]) -> str:
    """'  probe cost: 14.7% of serving time (852 s of 96.7 min, 4 rounds, the final round's 395 s after training
    stopped included); while training 8.5% (457 s of 90.2 min, 3 rounds)'."""
    cost = probe_cost(rounds)
    if cost is None:
        return ""
    head = f"  probe cost: {_pct(cost['share'])} of serving time"
    spent = f"{cost['probe_s']:.0f} s of {cost['run_s'] / 60:.1f} min, {cost['rounds']} rounds"
    if cost["final_counted"]:
        return (
            f"{head} ({spent}, the final round's {cost['final_s']:.0f} s after training stopped included); "
            f"while training {_pct(cost['training_share'])} ({cost['training_probe_s']:.0f} s of "
            f"{cost['training_s'] / 60:.1f} min, {cost['training_rounds']} rounds)"
        )
    line = f"{head} up to the last round ({spent}; the serving after it not counted)"
    if cost["final_s"] is not None:  # pinned: after the run, on a server of its own
        line += f"; final round {cost['final_s']:.0f} s pinned after the run, not counted"
    return line


def latest_full(rounds: list[ProbeRound]) -> ProbeRound:
    """The latest round with held-out items (a baseline, a final round, or a periodic round that asked them), else
    the latest round."""
    return next((r for r in reversed(rounds) if HEADLINE in r.suites), rounds[-1])


def paired_summary(
    rounds: list[ProbeRound], data_dir: Path | None, out: Path, last_served: int | None = None
) -> dict[str, Any] | None:
    """The v0 → latest comparison for `slca bench online`: the two rounds' per-item files copied under
    `out/probe/`, the paired result per suite recomputed from them (`ops.experiments.eval.stats.compare`; the stream's
    summary when the files are not on this machine), written to `out/probe_summary.json`. The latest round is the
    latest that asked the held-out items (periodic rounds of the training-task probe alone are in the table, not in
    the verdict); `last_served` is the last version the run served, to say whether it was judged."""
    if not rounds:
        return None
    latest = latest_full(rounds)
    base = next((r for r in rounds if r.version == latest.baseline_version and r.kind == "baseline"), None)
    base = base or next((r for r in rounds if r.version == latest.baseline_version), None)
    files = _copy_files([r for r in (base, latest) if r is not None], data_dir, out)
    summary: dict[str, Any] = {
        "baseline_version": latest.baseline_version,
        "baseline_cached": bool(base and base.cached),
        "latest_version": latest.version,
        "latest_versions": [latest.version_min, latest.version_max],
        "latest_kind": latest.kind,
        "latest_pinned": latest.pinned,
        "last_served_version": last_served,
        "mode": latest.mode,
        "files": files,
        "rounds": len(rounds),
        "probe_cost": probe_cost(rounds),
    }
    if base is not None and base.records in files and latest.records in files:
        from ops.experiments.eval.stats import compare, summarize
        from ops.experiments.eval.suite import read_jsonl

        a, b = ([x for x in read_jsonl(out / files[r.records]) if x.error is None] for r in (base, latest))
        summary.update(source="per-item files", baseline=summarize(a), latest=summarize(b), paired=compare(a, b))
    else:
        summary.update(
            source="probe stream (per-item files not found)",
            baseline=base.suites if base else None,
            latest=latest.suites,
            paired=latest.vs_v0,
        )
    summary["paired"] = _ordered(summary["paired"])
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
    return summary


def _ordered(paired: dict[str, Any]) -> dict[str, Any]:
    """The pooled and split suites first (held_out, test, novel, bfcl), then each BFCL category."""
    head = [name for name in PAIRED_SUITES if name in paired]
    return {name: paired[name] for name in head + sorted(set(paired) - set(head))}


def _copy_files(rounds: list[ProbeRound], data_dir: Path | None, out: Path) -> dict[str, str]:
    """Round file (relative to the data dir) → its copy (relative to `out`), for those present."""
    copied = {}
    for r in rounds:
        src = Path(data_dir) / r.records if data_dir is not None else None
        if src is None or not src.is_file():
            continue
        dest = out / "probe" / src.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        copied[r.records] = str(dest.relative_to(out))
    return copied


def markdown(rounds: list[ProbeRound], summary: dict[str, Any] | None) -> list[str]:
    if not rounds:
        return []
    full = latest_full(rounds)
    lines = [
        "",
        f"Probe ({full.mode}, never recorded): baseline and final rounds ask the same {full.items} items, periodic "
        "rounds the training-task probe's; success with its Wilson 95% interval, difference from v0 paired per item:",
        "",
        "| round | versions | held-out success | test | novel | train-probe | BFCL | exec | pref | tool turns | "
        "vs v0 (held-out) | vs v0 (train-probe) | kind |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        s, head = r.suites, r.headline
        first = r.version == r.baseline_version and r.kind != "final"
        lines.append(
            f"| v{r.version} | v{r.version_min}–v{r.version_max} | {rate(s.get(HEADLINE))} | {rate(s.get('test'))} | "
            f"{rate(s.get('novel'))} | {rate(s.get(TRAIN_PROBE))} | {rate(s.get('bfcl'))} | {_num(head.get('exec'))} | "
            f"{_num(head.get('pref'))} | {_num(head.get('tool_turns'), 2)} | "
            f"{'baseline' if first else difference(r.vs_v0.get(HEADLINE))} | "
            f"{'baseline' if first else difference(r.vs_v0.get(TRAIN_PROBE))} | "
            f"{r.kind}{' (cached)' if r.cached else ''}{' (pinned)' if r.pinned else ''} |"
        )
    if cost := cost_line(rounds):
        lines += ["", cost.strip()]
    if summary:
        lines += [
            "",
            f"v{summary['baseline_version']} → v{summary['latest_version']} per suite, paired "
            f"(from the {summary['source']}; bootstrap 95% interval, exact McNemar p):",
            "",
        ]
        lines += [f"- {LABELS.get(name, name)}: {difference(d)}" for name, d in summary["paired"].items()]
    return lines


def plot(ax, rounds: list[ProbeRound]) -> None:
    """Held-out, training-task probe and BFCL success with their 95% intervals, exec and pref, by round."""
    if rounds:
        v = [r.version for r in rounds]
        lines = (
            (HEADLINE, "held-out success", "o-"),
            (TRAIN_PROBE, "train-probe success", "d-."),
            ("bfcl", "BFCL success", "s--"),
        )
        for name, label, fmt in lines:
            rows = [(x, r.suites[name]) for x, r in zip(v, rounds) if name in r.suites]
            if rows:
                ys = [row["success"] for _, row in rows]
                err = [
                    [max(0.0, y - row["ci_low"]) for y, (_, row) in zip(ys, rows)],  # rounding at 0 and 1
                    [max(0.0, row["ci_high"] - y) for y, (_, row) in zip(ys, rows)],
                ]
                ax.errorbar([x for x, _ in rows], ys, yerr=err, fmt=fmt, ms=3, capsize=2, label=label)
        held = [(x, r.suites[HEADLINE]) for x, r in zip(v, rounds) if HEADLINE in r.suites]
        ax.plot([x for x, _ in held], [row.get("exec") for _, row in held], "^:", ms=3, label="exec (held-out)")
        ax.plot([x for x, _ in held], [row.get("pref") for _, row in held], "v:", ms=3, label="pref (held-out)")
        ax.legend(loc="lower right", fontsize=7)
        full = latest_full(rounds)
        d = full.vs_v0.get(HEADLINE)
        if d and full.version != full.baseline_version:
            ax.set_title(
                f"held-out probe: v{full.baseline_version} → v{full.version} "
                f"{d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]",
                fontsize=9,
            )
        else:
            ax.set_title("probe (paired with v0 per item)", fontsize=9)
    ax.set_xlabel("served policy version (round median)")
    ax.set_ylim(-0.02, 1.02)
