"""The promotion gate's part of `slca bench online`: every decision of the run with its figures, the per-item files
it judged, the rollbacks, and what the gate cost — copied from `<data_dir>/gate/` (the gate's record: every decision
is a line of `decisions.jsonl`, each version's gate items `items/v<N>.jsonl`) so the committed result carries them.

The timeline is the gate set's greedy success of the promoted version and of the candidate at each decision (the
promoted version answers no scored traffic in `make run`: callers are the only ones who reach it, so the gate's own
evaluations are where its success over time is seen)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

GATE_DIR = "gate"
"""Under `--out`: decisions.jsonl, rollbacks.jsonl, items/v<N>.jsonl."""


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def gate_summary(data_dir: Path, out: Path, serving_began: float | None, serving_s: float | None) -> dict[str, Any]:
    """Copy the gate's record under `out/gate/` and summarise it: decisions (minutes since serving began), rollbacks,
    outcomes counted, the gate's evaluation seconds and their share of the serving time. Paths written are
    relative to `out`."""
    src = data_dir / GATE_DIR
    decisions, rollbacks = _read_jsonl(src / "decisions.jsonl"), _read_jsonl(src / "rollbacks.jsonl")
    dst = out / GATE_DIR
    if src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        for name in ("decisions.jsonl", "rollbacks.jsonl"):
            if (src / name).is_file():
                shutil.copyfile(src / name, dst / name)
        judged = {v for d in decisions for v in (d.get("candidate"), d.get("promoted")) if v is not None}
        for version in sorted(judged):
            item_file = src / "items" / f"v{version}.jsonl"
            if item_file.is_file():
                (dst / "items").mkdir(exist_ok=True)
                shutil.copyfile(item_file, dst / "items" / item_file.name)
    for d in (*decisions, *rollbacks):
        if serving_began is not None and d.get("at"):
            d["minute"] = round((d["at"] - serving_began) / 60, 1)
    outcomes: dict[str, int] = {}
    for d in decisions:
        outcomes[d["outcome"]] = outcomes.get(d["outcome"], 0) + 1
    seconds = sum(float(d.get("seconds") or 0.0) for d in decisions)
    return {
        "decisions": decisions,
        "rollbacks": rollbacks,
        "outcomes": outcomes,
        "evaluation_s": round(seconds, 1),
        "share_of_serving": round(seconds / serving_s, 4) if serving_s else None,
        "files": f"{GATE_DIR}/" if src.is_dir() else None,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def gate_markdown(summary: dict[str, Any]) -> list[str]:
    """The gate's section of results.md: one row per decision, then the rollbacks and the cost."""
    decisions = summary["decisions"]
    lines = ["", "## Promotion gate", ""]
    if not decisions:
        lines.append("No gate decision in this run.")
    else:
        lines += [
            "| minute | candidate | promoted | outcome | n | promoted success % | candidate success % | diff [95% CI] "
            "| +/− items | McNemar p | seconds | why |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for d in decisions:
            diff = (
                "-"
                if d.get("diff") is None
                else f"{100 * d['diff']:+.1f} [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]"
            )
            p = "-" if d.get("mcnemar_p") is None else f"{d['mcnemar_p']:.3f}"
            lines.append(
                f"| {d.get('minute', '-')} | v{d['candidate']} | v{d['promoted']} | {d['outcome']} | {d.get('n', 0)} "
                f"| {_pct(d.get('promoted_success'))} | {_pct(d.get('candidate_success'))} | {diff} "
                f"| +{d.get('candidate_only', 0)}/−{d.get('promoted_only', 0)} | {p} "
                f"| {float(d.get('seconds') or 0):.0f} | {d['why']} |"
            )
    for r in summary["rollbacks"]:
        lines.append(
            f"- rollback at minute {r.get('minute', '-')}: v{r['version']} → v{r['previous']} ({r['outcome']}): "
            f"success {r['success']:.3f} (n {r['n']}) vs {r['previous_success']:.3f} (n {r['previous_n']})"
        )
    share = summary["share_of_serving"]
    lines.append(
        f"\nGate evaluations: {summary['evaluation_s']:.0f} s"
        + ("" if share is None else f", {100 * share:.1f}% of the serving time")
        + f"; outcomes {summary['outcomes'] or 'none'}; per-item files under `{summary['files'] or '-'}`."
    )
    return lines


def gate_lines(summary: dict[str, Any]) -> str:
    """What `slca bench online` prints about the gate."""
    if not summary["decisions"]:
        return "gate: no decision in this run"
    rows = [
        f"gate minute {d.get('minute', '-')}: v{d['candidate']} vs v{d['promoted']}: {d['outcome']}"
        + ("" if d.get("diff") is None else f" diff {d['diff']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]")
        for d in summary["decisions"]
    ]
    return "\n".join(rows)
