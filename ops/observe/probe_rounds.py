"""A held-out probe round as a record: what the probe publishes on `<prefix>:stats:probe` (one writer,
`summarise_round`) and what `slca status`, the dashboard and `slca bench online` read back (one reader,
`ProbeRound.from_json`), plus the per-item files every round leaves under `<data_dir>/probe/`.

A round is one run of the evaluation (`ops.experiments.eval.suite`) against the served API: success per suite with its
Wilson 95% interval, mean exec and pref rewards, tool turns, and the paired difference from the first round (v0, the
warm start as served) with its bootstrap 95% interval and the exact McNemar p-value
(`ops.experiments.eval.stats.compare`). Rounds are of three kinds: the baseline (v0, every item), periodic rounds
(a cheaper subset, by default the training-task probe) and the final round at the run's stop (every item, the last
served version); each carries the probe's running cost (`probe_s` of `run_s` serving seconds).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ops.experiments.eval.stats import BFCL, HELD_OUT, TRAIN_PROBE, compare, pool_of, summarize
from ops.experiments.eval.suite import ItemRecord, read_jsonl, write_jsonl
from slca.contracts.queues import STATS_PROBE
from slca.contracts.stats import probe_fields, probe_from_fields

PROBE_SUFFIX = STATS_PROBE
"""Capped stream (suffix after the prefix) of probe rounds: one field `json` per round (`ProbeRound.to_fields`,
`slca.contracts.stats.probe_fields`); written by the probe (`ops.run.feed.probe`), read by `ops.observe.redis_view`
(`slca.contracts.stats.probe_from_fields`)."""
ROUND_SCHEMA = 2
"""1: the sampled HierR probe (no per-item records, no intervals); its rounds are skipped by the readers."""
HEADLINE = HELD_OUT
"""The suite every view leads with: the task pack's held-out splits pooled (test + novel)."""
HEADLINE_FALLBACKS = (HELD_OUT, TRAIN_PROBE, BFCL)
"""A round without held-out items (a periodic round of the training-task probe alone) leads with the first of
these it has."""
PAIRED_SUITES = (HELD_OUT, "test", "novel", TRAIN_PROBE, BFCL)
"""Suites whose paired difference from v0 the views show, in this order (those a round has)."""
KINDS = ("baseline", "periodic", "final")
"""baseline: the first round (v0, every item); periodic: the rounds while training runs (`ops.probe_round_splits`);
final: the last served version at the run's stop (every item)."""
ROUNDS_DIR = "probe"
"""Folder of the per-item files under the data dir: `v<version>.jsonl`, one `ItemRecord` per line."""


@dataclass
class ProbeRound:
    version: int
    """The round's label: the median (low) policy version over its items."""
    version_min: int
    version_max: int
    """A swap can land mid-round: the versions that answered its items span [version_min, version_max]."""
    started_at: float
    seconds: float
    mode: str
    """'greedy' or 'sampled' (`ops.experiments.eval.suite.EvalPlan.mode`)."""
    items: int
    """Items asked; the summaries count only those whose request succeeded (`items - failed_requests`)."""
    failed_requests: int
    records: str
    """The round's per-item file, relative to the data dir (`probe/v<version>.jsonl`)."""
    suites: dict[str, dict[str, Any]]
    """Suite (test, novel, bfcl:<category>, pooled held_out and bfcl) → `ops.experiments.eval.stats.summarize`'s row (n,
    success, ci_low, ci_high, exec, pref, errors) plus `tool_turns` (mean model turns that wrote a call)."""
    vs_v0: dict[str, dict[str, Any]]
    """Suite → `ops.experiments.eval.stats.paired(v0 round, this round)`: n, a, b, diff, ci_low, ci_high (bootstrap
    95%), a_only, b_only, mcnemar_p. The v0 round compares with itself (diff 0)."""
    baseline_version: int
    """The version of the round `vs_v0` compares with."""
    schema: int = ROUND_SCHEMA
    kind: str = "periodic"
    """One of `KINDS`."""
    cached: bool = False
    """A baseline read from the warm start's cached evaluation (`ops.run.feed.baseline_cache`), not run again."""
    pinned: bool = False
    """Evaluated on the version's published weights in a server of its own (`slca bench online`'s final round),
    not on the running API."""
    probe_s: float = 0.0
    """Seconds the probe's rounds have held the serving API so far in this run, this round included (a final
    round, which runs after training stopped, is not counted)."""
    run_s: float = 0.0
    """Seconds since the probe first found the API ready (the run's serving time so far)."""

    @property
    def headline(self) -> dict[str, Any]:
        """The held-out row, else the first row of `HEADLINE_FALLBACKS` the round has."""
        return next((self.suites[name] for name in HEADLINE_FALLBACKS if name in self.suites), {})

    @property
    def headline_suite(self) -> str:
        return next((name for name in HEADLINE_FALLBACKS if name in self.suites), HEADLINE)

    @property
    def share(self) -> float | None:
        """The probe's share of the run's serving time so far (None before any serving time)."""
        return self.probe_s / self.run_s if self.run_s > 0 else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def to_fields(self) -> dict[str, str]:
        """The round's `stats:probe` stream entry."""
        return probe_fields(self.to_json())

    @classmethod
    def from_fields(cls, fields: dict) -> ProbeRound | None:
        """The round of a `stats:probe` entry, None for one of an older schema (as `from_json`); `ContractError`
        for an entry that is not a round's JSON."""
        return cls.from_json(probe_from_fields(fields))

    @classmethod
    def from_json(cls, data: Any) -> ProbeRound | None:
        """The round, or None for anything else (an older schema, a malformed entry, a headline without a number)."""
        if not isinstance(data, dict) or data.get("schema") != ROUND_SCHEMA:
            return None
        try:
            round_ = cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data or f.default is MISSING})
        except (KeyError, TypeError):
            return None
        ok = isinstance(round_.version, int) and isinstance(round_.suites, dict) and isinstance(round_.vs_v0, dict)
        return round_ if ok and _finite(round_.headline.get("success")) else None


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def tool_turns(record: ItemRecord) -> int:
    """Model turns that wrote at least one call (BFCL is single-turn: its calls carry no turn)."""
    return len({c.get("turn", 0) for c in record.calls})


def _members(name: str, records: list[ItemRecord]) -> list[ItemRecord]:
    if name in (HELD_OUT, BFCL):
        return [r for r in records if pool_of(r.suite) == name]
    return [r for r in records if r.suite == name]


def round_file(version: int, kind: str) -> str:
    """A round's per-item file, relative to the data dir: `probe/v<version>.jsonl`; a final round's
    `probe/v<version>-final.jsonl` (a periodic round at the same version keeps its own file)."""
    return f"{ROUNDS_DIR}/v{version}{'-final' if kind == 'final' else ''}.jsonl"


def summarise_round(
    records: list[ItemRecord],
    baseline: list[ItemRecord] | None,
    baseline_version: int | None,
    started_at: float,
    mode: str,
    fallback_version: int,
    kind: str = "periodic",
) -> ProbeRound:
    """One round from its records. Failed requests (a server restart mid-round) are left out of every rate: they
    say nothing about the policy. `baseline` None: this round is v0 and compares with itself."""
    ran = [r for r in records if r.error is None]
    suites = summarize(ran)
    for name, row in suites.items():
        members = _members(name, ran)
        row["tool_turns"] = sum(map(tool_turns, members)) / len(members)
    versions = [r.policy_version for r in ran if r.policy_version is not None] or [fallback_version]
    version = int(statistics.median_low(versions))
    base = ran if baseline is None else [r for r in baseline if r.error is None]
    return ProbeRound(
        version=version,
        version_min=min(versions),
        version_max=max(versions),
        started_at=started_at,
        seconds=time.time() - started_at,
        mode=mode,
        items=len(records),
        failed_requests=len(records) - len(ran),
        records=round_file(version, kind),
        suites=suites,
        vs_v0=compare(base, ran),
        baseline_version=version if baseline_version is None else baseline_version,
        kind=kind,
    )


class RoundFiles:
    """The per-item files of one run's rounds: `<data_dir>/probe/v<version>.jsonl`."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self.folder = self.data_dir / ROUNDS_DIR

    def write(self, round_: ProbeRound, records: list[ItemRecord]) -> Path:
        """Atomically (a temp file, then a rename): a reader never sees half a round."""
        path = self.data_dir / round_.records
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        write_jsonl(records, tmp)
        os.replace(tmp, path)
        return path

    def versions(self) -> list[int]:
        """The versions of this run's baseline and periodic rounds (final rounds' files are not among them)."""
        out = []
        for path in self.folder.glob("v*.jsonl"):
            try:
                out.append(int(path.stem[1:]))
            except ValueError:
                continue
        return sorted(out)

    def read(self, version: int) -> list[ItemRecord]:
        return read_jsonl(self.folder / f"v{version}.jsonl")

    def archive(self) -> Path | None:
        """Move an earlier run's files aside (`probe/old-<time>/`), so this run's v0 is the one every round
        compares with and `slca bench online` finds."""
        versions = self.versions()
        if not versions:
            return None
        dest = self.folder / f"old-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        dest.mkdir(parents=True)
        for path in self.folder.glob("v*.jsonl"):
            os.replace(path, dest / path.name)
        return dest
