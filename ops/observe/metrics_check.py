"""Which metrics a Grafana dashboard queries, and which a live /metrics page exposes (for the dashboard test)."""

from __future__ import annotations

import json
import re
from pathlib import Path

METRIC = re.compile(r"\bslca_[a-z0-9_]+\b")
DASHBOARD = Path(__file__).parent / "grafana" / "slca.json"


def queried_metrics(dashboard: dict) -> set[str]:
    """Every `slca_` series name in the panels' PromQL expressions."""
    names: set[str] = set()
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            names |= set(METRIC.findall(target.get("expr", "")))
    return names


def load_dashboard(path: Path = DASHBOARD) -> dict:
    return json.loads(path.read_text())


_SAMPLE_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
    "gauge": ("",),
    "untyped": ("",),
    "info": ("_info",),
}


def exposed_series(text: str) -> set[str]:
    """Series names a /metrics page can carry, from its `# TYPE` lines (a labelled metric that has no sample yet
    is declared but shows no line, so samples alone would miss it)."""
    names: set[str] = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[:2] == ["#", "TYPE"]:
            name, kind = parts[2], parts[3]
            base = name.removesuffix("_total") if kind == "counter" else name
            names |= {base + suffix for suffix in _SAMPLE_SUFFIXES.get(kind, ("",))}
        elif line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names


def missing_metrics(dashboard: dict, pages: list[str]) -> set[str]:
    exposed = set().union(*(exposed_series(p) for p in pages)) if pages else set()
    return queried_metrics(dashboard) - exposed
