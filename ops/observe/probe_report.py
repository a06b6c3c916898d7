"""The held-out probe's rounds for people: `slca status` lines, and what `slca bench online` writes about them
(the per-item files of v0 and the latest round, the paired v0 → latest result per suite, a Markdown table, a
chart panel). The headline everywhere: held-out success with its 95% interval, and the paired difference from v0
with its bootstrap 95% interval and McNemar p — exec and pref beside it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ops.observe.probe_rounds import HEADLINE, PAIRED_SUITES, ProbeRound

SUMMARY_FILE = "probe_summary.json"
LABELS = {"held_out": "held-out", "bfcl": "BFCL"}
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


TARGET_GAIN = 0.05
"""The benchmark target of a 60-minute `make run`: paired held-out success at least 5 points above v0, its 95%
interval above 0, and BFCL not worse (its interval not wholly below 0)."""


def verdict(summary: dict[str, Any] | None) -> str:
    """One sentence, computed from the paired v0 → latest result, that `slca bench online` writes first. The rule
    is fixed here, before any run: held-out rose when the bootstrap interval of the paired difference lies above
    0, fell when it lies below, else no measurable change; the target is met when it rose by ≥ `TARGET_GAIN` and
    BFCL did not fall."""
    if not summary or summary.get("rounds", 0) < 2 or summary["baseline_version"] == summary["latest_version"]:
        return "not judged: fewer than two probe rounds, so there is no paired comparison with v0"
    paired = summary.get("paired") or {}
    head, bfcl = paired.get(HEADLINE), paired.get("bfcl")
    if not head or not head.get("n"):
        return "not judged: the rounds share no held-out item"
    span = f"v{summary['baseline_version']} → v{summary['latest_version']}"
    if head["ci_low"] > 0:
        moved = "rose"
    elif head["ci_high"] < 0:
        moved = "fell"
    else:
        moved = "did not measurably change"
    bfcl_fell = bool(bfcl and bfcl.get("n") and bfcl["ci_high"] < 0)
    met = moved == "rose" and head["diff"] >= TARGET_GAIN and not bfcl_fell
    bfcl_text = "-" if not bfcl or not bfcl.get("n") else difference(bfcl)
    return (
        f"held-out success {moved} {span}: {difference(head)}; BFCL {bfcl_text}{' (fell)' if bfcl_fell else ''}; "
        f"target (≥ +{TARGET_GAIN:.2f} with the interval above 0, BFCL not worse) {'met' if met else 'not met'}"
    )


def round_line(r: ProbeRound) -> str:
    head = r.headline
    span = f" (v{r.version_min}–v{r.version_max})" if r.version_min != r.version_max else ""
    bfcl = r.suites.get("bfcl")
    cells = [f"v{r.version}{span}", f"held-out {rate(head)} n={head.get('n', 0)}"]
    if bfcl:
        cells.append(f"BFCL {rate(bfcl)} n={bfcl['n']}")
    cells.append(f"exec {_num(head.get('exec'))} pref {_num(head.get('pref'))} turns {_num(head.get('tool_turns'), 2)}")
    if r.version != r.baseline_version:
        cells.append(f"vs v{r.baseline_version} {difference(r.vs_v0.get(HEADLINE))}")
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
    return "\n".join(lines)


def paired_summary(rounds: list[ProbeRound], data_dir: Path | None, out: Path) -> dict[str, Any] | None:
    """The v0 → latest comparison for `slca bench online`: the two rounds' per-item files copied under
    `out/probe/`, the paired result per suite recomputed from them (`ops.experiments.eval.stats.compare`; the stream's
    summary when the files are not on this machine), written to `out/probe_summary.json`."""
    if not rounds:
        return None
    latest = rounds[-1]
    base = next((r for r in rounds if r.version == latest.baseline_version), None)
    files = _copy_files([r for r in (base, latest) if r is not None], data_dir, out)
    summary: dict[str, Any] = {
        "baseline_version": latest.baseline_version,
        "latest_version": latest.version,
        "latest_versions": [latest.version_min, latest.version_max],
        "mode": latest.mode,
        "files": files,
        "rounds": len(rounds),
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
    lines = [
        "",
        f"Held-out probe ({rounds[-1].mode}, the same {rounds[-1].items} items every round, never trained "
        "on); success with its Wilson 95% interval, difference from v0 paired per item:",
        "",
        "| round | versions | held-out success | test | novel | BFCL | exec | pref | tool turns | vs v0 (held-out) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        s, head = r.suites, r.headline
        lines.append(
            f"| v{r.version} | v{r.version_min}–v{r.version_max} | {rate(head)} | {rate(s.get('test'))} | "
            f"{rate(s.get('novel'))} | {rate(s.get('bfcl'))} | {_num(head.get('exec'))} | "
            f"{_num(head.get('pref'))} | {_num(head.get('tool_turns'), 2)} | "
            f"{difference(r.vs_v0.get(HEADLINE)) if r.version != r.baseline_version else 'baseline'} |"
        )
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
    """Held-out and BFCL success with their 95% intervals, exec and pref, by round."""
    if rounds:
        v = [r.version for r in rounds]
        for name, label, fmt in ((HEADLINE, "held-out success", "o-"), ("bfcl", "BFCL success", "s--")):
            rows = [(x, r.suites[name]) for x, r in zip(v, rounds) if name in r.suites]
            if rows:
                ys = [row["success"] for _, row in rows]
                err = [
                    [y - row["ci_low"] for y, (_, row) in zip(ys, rows)],
                    [row["ci_high"] - y for y, (_, row) in zip(ys, rows)],
                ]
                ax.errorbar([x for x, _ in rows], ys, yerr=err, fmt=fmt, ms=3, capsize=2, label=label)
        ax.plot(v, [r.headline.get("exec") for r in rounds], "^:", ms=3, label="exec (held-out)")
        ax.plot(v, [r.headline.get("pref") for r in rounds], "v:", ms=3, label="pref (held-out)")
        ax.legend(loc="lower right", fontsize=7)
        d = rounds[-1].vs_v0.get(HEADLINE)
        if d and rounds[-1].version != rounds[-1].baseline_version:
            ax.set_title(
                f"held-out probe: v{rounds[-1].baseline_version} → v{rounds[-1].version} "
                f"{d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]",
                fontsize=9,
            )
        else:
            ax.set_title("held-out probe (same items every round)", fontsize=9)
    ax.set_xlabel("served policy version (round median)")
    ax.set_ylim(-0.02, 1.02)
