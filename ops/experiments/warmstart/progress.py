"""Where a warm start stands, for whoever watches it: the record `slca sft --publish` keeps while it trains and hands
its model over (`<data_dir>/warm-start.json`, and the Redis key `<prefix>:warmstart` for the dashboard), read by
`slca up` (its live table, the state file `slca status` prints, the processes it holds until the warm start is
served) and by the dashboard's `api/stats`.

Phases, each with its start visible: `loading` (demonstrations, the model) → `checking` (the before-check, only with
`--eval-tasks`) → `training` (step, loss, share of the budget spent, time left) → `checking` (the after-check) →
`saving` (the model written to its directory) → `publishing` (its files made the next weight version) → `swapping`
(serve promotes it for callers and swaps it in as the candidate) → `served` — or `announced` (published and announced,
but serve did not confirm it in time), `failed` (with the error) or `stopped`. `trained_at`, `saved_at`,
`published_at` and `served_at` say where the time after training went.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

log = logging.getLogger("slca.sft")

RECORD_FILE = "warm-start.json"
"""In `common.data_dir`."""
ON_VERSION = ("served", "announced")
"""Phases in which the system runs on the warm start's version (the processes held for it start on it)."""


AFTER_TRAINING = {
    "checking": "checking the trained model on held-out tasks",
    "saving": "saving the model",
    "publishing": "publishing the model as the next weight version",
    "swapping": "v{v} published; serve is to promote and swap it in",
}
"""The phases between the end of training and the version served, as the live line says them."""


def record_key(prefix: str) -> str:
    return f"{prefix}:warmstart"


def record_path(data_dir: str | Path) -> Path:
    return Path(data_dir) / RECORD_FILE


@dataclass(frozen=True)
class WarmStartRecord:
    phase: str = "loading"
    started_at: float = 0.0
    """Wall-clock time the warm start began."""
    budget_s: float = 0.0
    """Its time budget (0: none)."""
    budget_steps: int = 0
    """Its step budget (0: none)."""
    step: int = 0
    loss: float | None = None
    progress: float = 0.0
    """Share of the budget spent, 0 to 1."""
    seconds_left: float | None = None
    """Training time left (None before the first step of a step budget)."""
    model_dir: str = ""
    """Where the warm-started model is written (`<cache_dir>/models/<ops.warm_model_name>`)."""
    version: int | None = None
    """The weight version it was published as."""
    trained_at: float | None = None
    """When training ended (its budget spent)."""
    saved_at: float | None = None
    """When the model directory was written (the after-check, if any, and the save done)."""
    published_at: float | None = None
    """When its weight version was sealed (hashed, signed) under `<data_dir>/weights/`."""
    served_at: float | None = None
    """When serve reported the version as both promoted and candidate."""
    error: str | None = None
    updated_at: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> WarmStartRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def on_version(self) -> bool:
        return self.phase in ON_VERSION and self.version is not None

    def line(self, now: float | None = None) -> str:
        """One line for people (the live table, `slca status`, the log)."""
        now = time.time() if now is None else now
        if self.phase == "training":
            left = "-" if self.seconds_left is None else clock(self.seconds_left)
            loss = "-" if self.loss is None else f"{self.loss:.3f}"
            return f"training {100 * self.progress:.0f}%, step {self.step}, loss {loss}, {left} left"
        if self.phase == "loading":
            return f"loading ({clock(now - self.started_at)})"
        if self.phase == "checking" and self.trained_at is None:  # the before-check
            return f"checking the base model on held-out tasks ({clock(now - self.started_at)})"
        if self.phase in AFTER_TRAINING:
            since = self.trained_at or self.started_at
            return f"{AFTER_TRAINING[self.phase].format(v=self.version)} ({clock(now - since)} after training)"
        if self.phase in ON_VERSION:
            took = f" after {clock(self.served_at - self.started_at)}" if self.served_at and self.started_at else ""
            return f"v{self.version} {self.phase}{took}"
        return f"{self.phase}{': ' + self.error if self.error else ''}"


def clock(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 60}:{s % 60:02d}"


def read_record(data_dir: str | Path) -> WarmStartRecord | None:
    """The record in the data dir, or None (none yet, or unreadable)."""
    try:
        return WarmStartRecord.from_json(json.loads(record_path(data_dir).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def parse_record(raw: bytes | str | None) -> dict | None:
    """The record as Redis holds it, as a dict (for `api/stats`), or None."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return WarmStartRecord.from_json(data).to_json() if isinstance(data, dict) else None


class ProgressBoard:
    """The writer: the file atomically on every change, Redis (best effort) too; training steps at most every
    `every_s` seconds, with one log line every `log_every_s`."""

    def __init__(self, data_dir: Path, redis_client=None, prefix: str = "slca", every_s: float = 2.0,
                 log_every_s: float = 30.0, clock=time.time) -> None:  # fmt: skip
        self.path = record_path(data_dir)
        self.redis, self.key = redis_client, record_key(prefix)
        self.every_s, self.log_every_s, self.clock = every_s, log_every_s, clock
        self.record = WarmStartRecord(started_at=clock())
        self._written = self._logged = 0.0
        self._redis_failed = False

    def update(self, **changes) -> WarmStartRecord:
        """A new phase or result: written now."""
        self.record = replace(self.record, **changes, updated_at=self.clock())
        self._write()
        log.info("warm start: %s", self.record.line(self.clock()))
        return self.record

    def step(self, step: int, loss: float, progress: float, seconds_left: float | None) -> None:
        """A training step: written when `every_s` has passed since the last write."""
        now = self.clock()
        changes = {"step": step, "loss": loss, "progress": progress, "seconds_left": seconds_left}
        self.record = replace(self.record, phase="training", **changes, updated_at=now)
        if now - self._written >= self.every_s:
            self._write()
        if now - self._logged >= self.log_every_s:
            self._logged = now
            log.info("warm start: %s", self.record.line(now))

    def _write(self) -> None:
        self._written = self.clock()
        text = json.dumps(self.record.to_json())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, self.path)
        if self.redis is None:
            return
        try:
            self.redis.set(self.key, text)
            self._redis_failed = False
        except Exception as exc:  # noqa: BLE001 - the file has it; Redis is the dashboard's view
            if not self._redis_failed:
                log.warning("warm start progress not written to Redis: %s", exc)
            self._redis_failed = True
