"""Small HTTP probes of running processes (Prometheus text scrapes), with short timeouts: never hang a CLI."""

from __future__ import annotations

import urllib.error
import urllib.request


def scrape(url: str, timeout_s: float = 1.0) -> str | None:
    """The text of a /metrics page, or None when the process does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def sample_value(text: str, metric: str) -> float | None:
    """First sample of `metric` (exact name, any labels) in Prometheus text format."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name == metric:
            try:
                return float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                return None
    return None


def metric_families(text: str) -> set[str]:
    """Family names declared in a /metrics page (`# TYPE name kind`); counters are declared without `_total`,
    so both spellings are returned for them."""
    names: set[str] = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "#" and parts[1] == "TYPE":
            names.add(parts[2])
            if parts[3] == "counter":
                names.add(parts[2] + "_total")
        elif line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names
