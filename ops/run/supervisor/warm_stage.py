"""The warm start beside serving (`ops.warm_start_beside`): on a machine without a warm-started model `slca up` serves
the base model at once and trains the warm start as one more supervised process, instead of before everything.

- `warm_start_spec`: the `warmstart` process, `slca sft --publish` with the budget (`ops.warm_start_minutes`,
  `ops.warm_start_steps`), the held-out check (`ops.warm_start_eval_tasks`), where the model goes
  (`<cache_dir>/models/<ops.warm_model_name>`, which later runs find and serve from the start) and serve's address;
  one-shot (never restarted: a failed warm start is reported and the system goes on with the base model), with its
  OpenMP share beside serve (`plan.split_threads`), and a plain log (no progress bar: its progress is its record).
  Once trained it hands its model over as a hot swap (ops/experiments/warmstart/handover.py).
- `hold`: the feed, the learner and the gate wait for it (`ProcessSpec.after`): the learner must train the model the
  feed's rollouts come from, the probe's baseline must be the warm start's own evaluation, and the gate keeps the
  warm start's records by its version.
- `make_prepare`: what a held process starts with once the warm start has finished. When its version is served (the
  record `slca sft --publish` keeps: ops/experiments/warmstart/progress.py) the warm-started model (`SLCA_MODEL`: the
  learner trains it; its versions are numbered after the warm start's, the one on disk) and, for the feed, that
  version as the probe's baseline (`ops.probe_baseline_version`: its round is the one cached by model content, read
  back by later runs that serve the same model as v0; the gate too: ops/run/gate/warm_records.py). Otherwise
  nothing changes: the base model, as before.
- `WarmStartWatch`: the record as one line of the live table and the state file (`slca status`).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ops.experiments.warmstart.model import warm_model_dir
from ops.experiments.warmstart.progress import read_record, record_path
from ops.common.serve_urls import candidate_url
from ops.run.supervisor.plan import serve_url, split_threads
from ops.run.supervisor.process import ProcessSpec
from ops.settings import OpsSettings
from slca.config import Config

log = logging.getLogger("slca.up")

NAME = "warmstart"
HELD = ("learn", "feed", "gate")
"""Started only once the warm start has finished (the gate: nothing is due before the learner publishes, and it
must know the warm start's version to read and keep its records across runs)."""
JUDGES_THE_WARM_START = ("feed", "gate")
"""Told the warm start's version (`ops.probe_baseline_version`): the probe's baseline, the gate's cached records."""


def warm_start_spec(
    config: Config, global_argv: list[str], env: dict[str, str], log_dir: Path, threads: int | None = None
) -> ProcessSpec:
    ops = config.get(OpsSettings)
    argv = [
        sys.executable,
        "-m",
        "slca",
        *global_argv,
        "sft",
        "--publish",
        "--minutes",
        str(ops.warm_start_minutes),
        "--steps",
        str(ops.warm_start_steps),
        "--min-steps",
        str(ops.warm_start_min_steps),
        "--eval-tasks",
        str(ops.warm_start_eval_tasks),
        "--out",
        str(warm_model_dir(config)),
        "--serve-url",
        ops.feed_url or serve_url(config),
    ]
    if url := candidate_url(config, ops):  # `serve-candidate` (ops.candidate_replica): the handover waits for it too
        argv += ["--candidate-url", url]
    own = {"TQDM_DISABLE": "1", **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    return ProcessSpec(
        NAME,
        argv,
        log_dir / f"{NAME}.log",
        {**env, **own},
        restart=False,
        nice=ops.training_nice,
        log_max_bytes=ops.log_max_bytes,
        log_backups=ops.log_backups,
    )


def plan_beside(
    config: Config, global_argv: list[str], env: dict[str, str], data_dir: Path, specs: list[ProcessSpec]
) -> list[ProcessSpec]:
    """`slca up`'s plan with the warm start beside serving: the `warmstart` process first, the held ones waiting
    for it; an earlier run's record is forgotten."""
    forget_record(data_dir)
    threads = split_threads(config, exported="OMP_NUM_THREADS" in env, warm_start=True).get(NAME)
    return hold(specs, warm_start_spec(config, global_argv, env, data_dir / "logs", threads))


def hold(specs: list[ProcessSpec], warm: ProcessSpec) -> list[ProcessSpec]:
    """The plan with the warm start first and the held processes waiting for it."""
    held = [replace(s, after=(*s.after, warm.name)) if s.name in HELD else s for s in specs]
    return [warm, *held]


def make_prepare(data_dir: Path) -> Callable[[ProcessSpec], ProcessSpec]:
    def prepare(spec: ProcessSpec) -> ProcessSpec:
        if NAME not in spec.after:
            return spec
        record = read_record(data_dir)
        if record is None or not record.on_version:
            why = record.line() if record is not None else "no record"
            log.warning("the warm start is not served (%s): %s starts on the base model", why, spec.name)
            return spec
        env = {**spec.env, "SLCA_MODEL": record.model_dir}
        if spec.name in JUDGES_THE_WARM_START:
            env["SLCA_OPS__PROBE_BASELINE_VERSION"] = str(record.version)
        log.info("the warm start is served as v%s: %s starts on %s", record.version, spec.name, record.model_dir)
        return replace(spec, env=env)

    return prepare


def forget_record(data_dir: Path) -> None:
    """An earlier run's record goes before this run's warm start begins (held processes must read this run's)."""
    record_path(data_dir).unlink(missing_ok=True)


class WarmStartWatch:
    """The record as a line for the process table, while `slca up` supervises a warm start."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def details(self) -> dict[str, str]:
        record = read_record(self.data_dir)
        return {NAME: record.line()} if record is not None else {}
