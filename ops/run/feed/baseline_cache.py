"""The warm start's probe evaluation, kept on disk so that a later run on the same model reuses it.

The baseline round (v0) asks every probe item of the frozen warm start; on a 2-core machine that is minutes of a
run's serving time. Its answer depends only on the weights, the items, how they are asked and how they are
scored, so it is cached under `<cache_dir>/probe-baselines/<key>.json`, where the key is a hash of
- the model directory's content (its weight manifest when it has one — a published version's `manifest.json`
  holds each file's sha256 — else every file's sha256, memoised by path, size and mtime),
- the probe's item ids (suite/id, in order) and how they are asked (mode, token and turn budgets),
- the scorer's version: `workers.scorer_version` and a hash of `workers/scoring`'s source files and the workers'
  settings.
A change to any of these is a different key, so a stale entry is never read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ops.experiments.eval.suite import EvalItem, EvalPlan, ItemRecord
from slca.contracts.weights import MANIFEST_NAME

log = logging.getLogger("slca.feed.probe")

CACHE_FOLDER = "probe-baselines"
"""Under `common.cache_dir`."""
FINGERPRINTS = "fingerprints.json"
"""Memo of model-directory hashes, keyed by the directory and its files' sizes and mtimes."""


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _stat_key(model_dir: Path, files: list[Path]) -> str:
    parts = [str(model_dir.resolve())] + [
        f"{p.relative_to(model_dir)}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def model_fingerprint(model_dir: Path, memo_dir: Path | None = None) -> str:
    """A hash of the model directory's content: its weight manifest when it has one, else every file's sha256
    (memoised in `memo_dir` by path, size and mtime, so a later run does not read the weights again)."""
    model_dir = Path(model_dir)
    manifest = model_dir / MANIFEST_NAME
    if manifest.is_file():
        return "manifest:" + _file_sha256(manifest)
    files = sorted(p for p in model_dir.rglob("*") if p.is_file())
    memo_path = memo_dir / FINGERPRINTS if memo_dir is not None else None
    memo = _read_json(memo_path) if memo_path is not None else {}
    stat_key = _stat_key(model_dir, files)
    if stat_key in memo:
        return memo[stat_key]
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(model_dir)}\0{_file_sha256(path)}\n".encode())
    fingerprint = "files:" + digest.hexdigest()
    if memo_path is not None:
        _write_json(memo_path, {**memo, stat_key: fingerprint})
    return fingerprint


def scorer_version() -> str:
    """The scorer's version: `workers.scorer_version` (bumped when scoring changes) and a hash of
    `workers/scoring`'s source files and the workers' settings (a change nobody bumped the version for)."""
    import workers.scoring

    from ops.experiments.eval.items import _scoring_settings

    settings = _scoring_settings()
    digest = hashlib.sha256()
    for path in sorted(Path(workers.scoring.__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(settings.model_dump_json().encode())
    return f"{settings.scorer_version}+{digest.hexdigest()[:12]}"


def cache_key(model: str, items: list[EvalItem], plan: EvalPlan, scorer: str) -> str:
    """The entry's name: a hash of the model's fingerprint, the item ids, how they are asked and the scorer."""
    what = {
        "model": model,
        "items": [f"{i.suite}/{i.item_id}" for i in items],
        "mode": plan.mode,
        "max_tokens": plan.max_tokens,
        "max_turns": plan.max_turns,
        "scorer": scorer,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class CachedBaseline:
    records: list[ItemRecord]
    seconds: float
    """What the round took when it ran (the probe's per-item cost estimate on this machine)."""


@dataclass(frozen=True)
class BaselineCache:
    """One entry: `<folder>/<key>.json` with the round's records and seconds."""

    folder: Path
    key: str
    model_dir: str = ""

    @property
    def path(self) -> Path:
        return self.folder / f"{self.key}.json"

    def load(self) -> CachedBaseline | None:
        data = _read_json(self.path)
        try:
            return CachedBaseline([ItemRecord(**r) for r in data["records"]], float(data["seconds"]))
        except (KeyError, TypeError, ValueError):
            return None

    def store(self, records: list[ItemRecord], seconds: float) -> Path:
        entry = {"model_dir": self.model_dir, "seconds": seconds, "records": [asdict(r) for r in records]}
        _write_json(self.path, entry)
        return self.path


def baseline_cache(
    cache_dir: Path, model_dir: Path, items: list[EvalItem], plan: EvalPlan, folder_name: str = CACHE_FOLDER
) -> BaselineCache:
    """The entry for the warm start in `model_dir` asked `items` under `plan`, in `<cache_dir>/<folder_name>` (the
    probe's, or the gate's: ops/run/gate/warm_records.py). Hashes the model: call it off the event loop."""
    folder = Path(cache_dir) / folder_name
    key = cache_key(model_fingerprint(model_dir, memo_dir=folder), items, plan, scorer_version())
    return BaselineCache(folder, key, Path(model_dir).name)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    """Atomically: a temp file, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
