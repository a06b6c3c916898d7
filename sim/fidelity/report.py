"""The fidelity table (markdown and JSON) from the summaries of a results folder, `bench/sgls/<name>/`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.fidelity.episodes import DOMAINS
from sim.fidelity.summary import TARGETS

ROWS = [
    ("shape", "shape: response validates against the response schema"),
    ("error_precision", "errors: precision of 'this call fails'"),
    ("error_recall", "errors: recall of 'this call fails'"),
    ("error_kind", "errors: same kind (of calls failing on both sides)"),
    ("derived", "no-change calls: derived fields agree"),
    ("state", "state-changing calls: fields changed as the real tool did"),
    ("state_real_changes", "state-changing calls: fields the real call changed, reproduced"),
    ("state_described", "state-changing calls on entities the simulator had stated before"),
    ("state_calls_exact", "state-changing calls: every field right"),
    ("consistency", "consistency: earlier statements repeated"),
]
BACKENDS = ("schema", "local", "llm")


def load(folder: Path) -> list[dict[str, Any]]:
    out = [json.loads(p.read_text()) for p in sorted(folder.glob("summary-*.json"))]
    order = {b: i for i, b in enumerate(BACKENDS)}
    dorder = {d: i for i, d in enumerate(DOMAINS)}
    return sorted(
        out, key=lambda s: (order.get(s["backend"], 9), bool(s.get("world_seed")), dorder.get(s["domain"], 9))
    )


def heading(backend: str, runs: list[dict[str, Any]]) -> list[str]:
    """A section's title: the backend, and whether the simulator was told the world (a seeded one knows the
    database: which ids exist and their records; its figures are not an unseeded simulator's)."""
    seeds = sorted({s["world_seed"] for s in runs if s.get("world_seed")})
    if not seeds:
        return [f"## backend `{backend}`, no world seed", ""]
    return [
        f"## backend `{backend}`, seeded with the domain's database ({', '.join(f'`{w}`' for w in seeds)})",
        "",
        "The simulator was given a world seed (`sim/world.py`): it knows which ids exist and their records, as the "
        "real tools' database does. Compare with the unseeded section, not with the real tools' knowledge.",
        "",
    ]


def cell(figure: dict[str, Any]) -> str:
    if not figure or figure.get("value") is None:
        return "n/a"
    interval = f"[{100 * figure['low']:.1f}–{100 * figure['high']:.1f}]"
    return f"{100 * figure['value']:.1f}% {interval} ({figure['k']}/{figure['n']})"


def markdown(summaries: list[dict[str, Any]]) -> str:
    lines = [
        "# SGLS fidelity",
        "",
        "Written by `slca sim fidelity` (`sim/fidelity/`): each domain's expected calls and their broken variants "
        "replayed on the real tools and on the simulator; shares with their 95% Wilson intervals (k/n). Targets "
        "are those of the `local` backend.",
        "",
    ]
    for backend, seeded in dict.fromkeys((s["backend"], bool(s.get("world_seed"))) for s in summaries):
        runs = [s for s in summaries if s["backend"] == backend and bool(s.get("world_seed")) == seeded]
        lines += heading(backend, runs)
        lines += ["| measure | target | " + " | ".join(s["domain"] for s in runs) + " |"]
        lines += ["|---|---|" + "---|" * len(runs)]
        for key, label in ROWS:
            target = "" if key not in TARGETS else "100%" if TARGETS[key] == 1 else f"≥ {100 * TARGETS[key]:.0f}%"
            lines.append(f"| {label} | {target} | " + " | ".join(cell(s["figures"][key]) for s in runs) + " |")
        lines.append(
            "| calls (expected + variants), episodes | | "
            + " | ".join(
                f"{s['figures']['expected_calls']} + {s['figures']['variant_calls']}, {s['episodes']}" for s in runs
            )
            + " |"
        )
        lines.append(
            "| simulated call latency p50 / p95 / mean (ms) | | "
            + " | ".join(_latency(s["figures"]["latency_ms"]) for s in runs)
            + " |"
        )
        lines.append(
            "| derived values held only by unseen real answers (not scored) | | "
            + " | ".join(str(s["figures"]["derived_unseen"]) for s in runs)
            + " |"
        )
        lines.append(
            "| answers by source | | " + " | ".join(_sources(s["figures"]["sim_sources"]) for s in runs) + " |"
        )
        lines += ["", "Recall by kind of failing call:", ""]
        lines += ["| failing call | " + " | ".join(s["domain"] for s in runs) + " |", "|---|" + "---|" * len(runs)]
        labels = sorted({label for s in runs for label in s["figures"]["recall_by_variant"]})
        for label in labels:
            lines.append(
                f"| {label} | "
                + " | ".join(cell(s["figures"]["recall_by_variant"].get(label, {})) for s in runs)
                + " |"
            )
        lines += ["", "Commands:", ""]
        lines += [f"- {s['domain']}: `{s['command']}` ({s['when']}, {s['machine']})" for s in runs]
        lines.append("")
    return "\n".join(lines)


def _latency(lat: dict[str, Any]) -> str:
    if lat.get("p50") is None:
        return "n/a"
    return f"{lat['p50']:.2f} / {lat['p95']:.2f} / {lat['mean']:.2f}"


def _sources(sources: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(sources.items())) or "n/a"


def write_table(folder: Path) -> tuple[Path, Path]:
    summaries = load(folder)
    md, js = folder / "table.md", folder / "table.json"
    md.write_text(markdown(summaries), encoding="utf-8")
    js.write_text(json.dumps({"targets": TARGETS, "runs": summaries}, indent=1, ensure_ascii=False), encoding="utf-8")
    return md, js
