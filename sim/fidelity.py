"""How far SGLS strays from the real API: replay τ² expected actions (and broken variants) on both.

For each τ² task with expected actions, the actions run in order in a real episode (fresh database) and
in a simulated episode offering the same tools as `x-mode: simulated` with the same response schemas.
Deliberately invalid variants (a required argument dropped, a wrong type, an unknown id) run in a
second pair of episodes. Measured per backend: response schema validity, agreement on key fields (ids and
echoed arguments of the real answer), field coverage, agreement on error behaviour (both fail or both
succeed) for valid and invalid calls, and latency.
"""

from __future__ import annotations

import copy
import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from sim.real.tau2 import tasks_path
from sim.schemas import is_valid
from sim.state import is_id_key
from slca.contracts import ToolResult


@dataclass
class Case:
    task_id: str
    calls: list[tuple[str, dict[str, Any]]]
    variants: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    """(tool, arguments, what was broken)."""


@dataclass
class Pair:
    tool: str
    arguments: dict[str, Any]
    real: ToolResult
    sim: ToolResult
    invalid: str | None = None


def tau2_cases(domain: str, parameters: dict[str, dict[str, Any]]) -> list[Case]:
    """The domain's tasks with expected actions, each with invalid variants of its first actions."""
    with open(tasks_path(domain), encoding="utf-8") as fh:
        tasks = json.load(fh)
    cases = []
    for task in tasks:
        actions = (task.get("evaluation_criteria") or {}).get("actions") or []
        calls = [(a["name"], a.get("arguments") or {}) for a in actions if a["name"] in parameters]
        if calls:
            case = Case(str(task["id"]), calls)
            case.variants = [v for name, args in calls[:2] for v in invalid_variants(name, args, parameters[name])]
            cases.append(case)
    return cases


def invalid_variants(name: str, args: dict[str, Any], schema: dict[str, Any]) -> list[tuple[str, dict, str]]:
    out = []
    required = [k for k in schema.get("required", []) if k in args]
    if required:
        broken = {k: v for k, v in args.items() if k != required[0]}
        out.append((name, broken, f"missing {required[0]}"))
    strings = [k for k, v in args.items() if isinstance(v, str)]
    if strings:
        out.append((name, {**args, strings[0]: 12345}, f"wrong type {strings[0]}"))
    ids = [k for k, v in args.items() if is_id_key(k) and isinstance(v, str)]
    if ids:
        out.append((name, {**args, ids[0]: "ZZ" + args[ids[0]][::-1] + "9"}, f"unknown {ids[0]}"))
    return out


async def replay(
    cases: list[Case], tools: list[dict[str, Any]], real_provider, sim_provider, progress=None
) -> list[Pair]:
    simulated = [_as_simulated(t) for t in tools]
    pairs: list[Pair] = []
    for index, case in enumerate(cases):
        if progress is not None:
            progress(index, len(cases), case.task_id)
        for calls, invalid in ((case.calls, False), (case.variants, True)):
            real_ep = await real_provider.new_episode(tools, f"real-{case.task_id}")
            sim_ep = await sim_provider.new_episode(simulated, f"sim-{case.task_id}")
            for call in calls:
                name, args = call[0], call[1]
                real = await real_ep.call(name, copy.deepcopy(args))
                sim = await sim_ep.call(name, copy.deepcopy(args))
                pairs.append(Pair(name, args, real, sim, call[2] if invalid else None))
            await real_ep.close()
            await sim_ep.close()
    return pairs


def _as_simulated(tool: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(tool)
    out["function"]["x-mode"] = "simulated"
    out["function"].pop("x-pack", None)
    return out


def key_fields(real: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The fields a client relies on: ids and values echoing the call's arguments (or a scalar answer)."""
    if not isinstance(real, dict):
        return {"<value>": real}
    return {k: v for k, v in real.items() if not isinstance(v, (dict, list)) and (is_id_key(k) or k in arguments)}


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def summarise(pairs: list[Pair], schemas: dict[str, dict[str, Any]]) -> dict[str, Any]:
    valid_pairs = [p for p in pairs if p.invalid is None]
    invalid_pairs = [p for p in pairs if p.invalid is not None]
    sim_ok = [p for p in pairs if p.sim.ok]
    real_ok = [p for p in pairs if p.real.ok]
    both_ok = [p for p in valid_pairs if p.sim.ok and p.real.ok]
    key_hits = key_total = cover_hits = cover_total = 0
    for p in both_ok:
        for k, v in key_fields(p.real.content, p.arguments).items():
            key_total += 1
            got = (
                p.sim.content
                if k == "<value>"
                else (p.sim.content or {}).get(k)
                if isinstance(p.sim.content, dict)
                else None
            )
            key_hits += got == v
        if isinstance(p.real.content, dict):
            cover_total += len(p.real.content)
            cover_hits += (
                sum(k in (p.sim.content or {}) for k in p.real.content) if isinstance(p.sim.content, dict) else 0
            )
    model_answers = [p for p in sim_ok if p.sim.meta.get("source") in ("model", "fallback")]
    return {
        "calls": len(valid_pairs),
        "invalid_calls": len(invalid_pairs),
        "sim_schema_valid": _share(sum(is_valid(schemas.get(p.tool), p.sim.content) for p in sim_ok), len(sim_ok)),
        "real_schema_valid": _share(sum(is_valid(schemas.get(p.tool), p.real.content) for p in real_ok), len(real_ok)),
        "key_field_agreement": _share(key_hits, key_total),
        "field_coverage": _share(cover_hits, cover_total),
        "error_agreement_valid": _share(sum(p.real.ok == p.sim.ok for p in valid_pairs), len(valid_pairs)),
        "error_agreement_invalid": _share(sum(p.real.ok == p.sim.ok for p in invalid_pairs), len(invalid_pairs)),
        "real_errors_valid": sum(not p.real.ok for p in valid_pairs),
        "model_answer_share": _share(
            sum(p.sim.meta.get("source") == "model" for p in model_answers), len(model_answers)
        )
        if model_answers
        else None,
        "sim_p50_ms": 1000 * statistics.median([p.sim.latency_s for p in pairs]) if pairs else None,
        "real_p50_ms": 1000 * statistics.median([p.real.latency_s for p in pairs]) if pairs else None,
        "sim_mean_ms": 1000 * statistics.fmean([p.sim.latency_s for p in pairs]) if pairs else None,
        "real_mean_ms": 1000 * statistics.fmean([p.real.latency_s for p in pairs]) if pairs else None,
    }


ROWS = [
    ("replayed calls (valid / invalid variants)", lambda s: f"{s['calls']} / {s['invalid_calls']}"),
    ("real gold calls that errored", lambda s: str(s["real_errors_valid"])),
    ("schema validity: SGLS responses", lambda s: _pct(s["sim_schema_valid"])),
    ("schema validity: real responses", lambda s: _pct(s["real_schema_valid"])),
    ("key-field agreement (ids, echoed args)", lambda s: _pct(s["key_field_agreement"])),
    ("field coverage (real keys present)", lambda s: _pct(s["field_coverage"])),
    ("error agreement, valid calls", lambda s: _pct(s["error_agreement_valid"])),
    ("error agreement, invalid variants", lambda s: _pct(s["error_agreement_invalid"])),
    ("model-made answers (rest: fallback)", lambda s: _pct(s["model_answer_share"])),
    ("latency p50 / mean, SGLS (ms)", lambda s: f"{s['sim_p50_ms']:.2f} / {s['sim_mean_ms']:.2f}"),
    ("latency p50 / mean, real (ms)", lambda s: f"{s['real_p50_ms']:.2f} / {s['real_mean_ms']:.2f}"),
]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def format_table(domain: str, backend: str, summary: dict[str, Any]) -> str:
    width = max(len(r[0]) for r in ROWS)
    lines = [f"SGLS fidelity — τ² {domain}, backend {backend}", "-" * (width + 14)]
    lines += [f"{label:<{width}}  {render(summary)}" for label, render in ROWS]
    return "\n".join(lines)
