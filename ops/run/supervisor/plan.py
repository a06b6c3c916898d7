"""Which processes `slca up` runs and how: one registry entry per process kind (no if-chains)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from ops.common.serve_urls import candidate_port, candidate_replica_on, candidate_url, serve_url
from ops.settings import OpsSettings
from ops.run.supervisor.process import ProcessSpec
from slca.config import Config, ConfigError, sections

log = logging.getLogger("slca.up")


@dataclass(frozen=True)
class ProcessKind:
    command: str
    """The `slca` subcommand that runs it."""
    section: str
    """Settings section of its component (where its `metrics_port` field lives)."""
    metrics_on_api: bool = False
    """True for serve: /metrics on the API port instead of a separate metrics port."""
    stop_group: bool = True
    """SIGTERM its whole process group at stop; False: the leader only (`ProcessSpec.stop_group`)."""


PROCESS_KINDS: dict[str, ProcessKind] = {
    "serve": ProcessKind("serve", "serve", metrics_on_api=True),
    "worker": ProcessKind("worker", "workers", stop_group=False),  # Celery's warm shutdown stops its pool
    "assembler": ProcessKind("assembler", "workers"),
    "learn": ProcessKind("learn", "learner"),
    "feed": ProcessKind("feed", "ops"),
    "gate": ProcessKind("gate", "ops"),  # the promotion gate (ops/run/gate/)
}


def registered_commands() -> set[str]:
    """Top-level `slca` commands whose component CLI is importable right now."""
    from slca.cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def _metrics_env(kind: ProcessKind, name: str, port: int, config: Config) -> dict[str, str]:
    """Env that sets the child's metrics port, only when its settings class declares one (unknown fields are
    configuration errors in the child)."""
    if kind.section == "ops":
        return {}  # the feed reads ops.metrics_ports itself
    try:
        fields = type(config.section(kind.section)).model_fields
    except (ModuleNotFoundError, ConfigError):
        return {}
    if "metrics_port" not in fields:
        log.warning("%s: %s settings have no metrics_port field; its metrics are not exposed", name, kind.section)
        return {}
    return {f"SLCA_{kind.section.upper()}__METRICS_PORT": str(port)}


def gpu_present(driver: Path = Path("/proc/driver/nvidia/gpus")) -> bool:
    """An NVIDIA GPU is installed (its driver lists one), read without importing torch into the supervisor: there
    vLLM and the learner run on the GPU and their CPU threads are not what this plan shares out."""
    try:
        return any(driver.iterdir())
    except OSError:
        return False


def split_threads(
    config: Config,
    cores: int | None = None,
    exported: bool = False,
    warm_start: bool = False,
    gpu: bool | None = None,
) -> dict[str, int]:
    """OMP_NUM_THREADS per process: `ops.process_threads` when set; else, with an engine that runs on the threads it
    is given (the hf engine: `EngineSpec.threads_from_plan`), serve and the learner share the cores (serve the
    smaller half), so their two OpenMP teams together hold no more threads than there are cores; otherwise nothing
    (vLLM sizes its own team; the other processes run no torch work) but the learner beside a vLLM that serves on
    the CPU (`gpu`: None, look): vLLM keeps a core for its scheduler and computes on the rest (on 2 cores serve's log
    says "Reducing Torch threads from 2 to 1"), so a learner with torch's default team (every core) puts threads on
    the core vLLM computes on — two teams oversubscribing 2 cores slowed a decode step 3–10× (docs/cpu-facts.md) and
    a small chat beside an fp32 learner step took 0.8–22.6 s in the 30-minute soak; the learner gets half the cores
    (1 on 2; the soak after it: every small chat within its bound, bench/soak/learning-30-control).
    `warm_start`: the warm start trains beside serve (`warmstart`, ops/run/supervisor/warm_stage.py) before the
    learner starts: it takes the learner's share (1 and 1 on 2 cores); beside vLLM it takes every core (serve is
    idle but for a caller's few requests: on a fresh 2-core clone, sft held to one core left the machine at load 1.2
    and spent 4:45 on its 20-task pre-check before its first step).
    With a candidate replica (`ops.candidate_replica`) `serve-candidate` is a third torch process: the two serve
    processes split serve's share (see below), each at least 1 thread.
    `exported`: the user exported OMP_NUM_THREADS, which then applies to every child unless counts are set
    (`serve-candidate` not named in `ops.process_threads` gets serve's count)."""
    ops = config.get(OpsSettings)
    if ops.process_threads is not None:
        return {name: n for name, n in ops.process_threads.items() if n > 0}
    if exported:
        return {}
    try:
        from serve.engines.registry import engine_spec

        shared = engine_spec(config.section("serve").engine).threads_from_plan
    except (ModuleNotFoundError, ConfigError):
        return {}
    beside = warm_start and "serve" in ops.processes
    both = {"serve", "learn"} <= set(ops.processes)
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    if not shared:
        on_cpu = not (gpu if gpu is not None else gpu_present())
        learner = {"learn": max(1, cores // 2)} if both and on_cpu else {}
        return {**learner, "warmstart": cores} if beside else learner
    if not beside and not both:
        return {}
    serve = max(1, cores // 2)
    threads = {"serve": serve, "learn": max(1, cores - serve)}
    if "serve" in ops.processes and candidate_replica_on(config, ops):
        # serve-candidate splits serve's share with serve rather than taking from the learner, whose steps pace the
        # loop: in `slca up` the promoted replica answers only callers (often none) while serve-candidate answers
        # the feed, the probe and the gate's candidate runs, so it takes the larger half. Three teams of one thread
        # on 2 cores still hold one more thread than there are cores: no process can run on none.
        threads["serve"], threads[CANDIDATE] = max(1, serve // 2), max(1, serve - serve // 2)
    if beside:
        threads["warmstart"] = max(1, cores - serve)
    return threads


def build_specs(
    config: Config,
    global_argv: list[str],
    base_env: dict[str, str],
    log_dir: Path,
    available: set[str] | None = None,
    warm_start: bool = False,
) -> tuple[list[ProcessSpec], list[str]]:
    """Process specs for every configured process whose command exists; returns (specs, skipped names).
    `warm_start`: the warm start will train beside serve (`split_threads`; its own spec: warm_stage.py)."""
    ops = config.get(OpsSettings)
    available = registered_commands() if available is None else available
    specs, skipped = [], []
    threads = split_threads(config, exported="OMP_NUM_THREADS" in base_env, warm_start=warm_start)
    for name in ops.processes:
        kind = PROCESS_KINDS.get(name)
        if kind is None:
            raise ConfigError(f"ops.processes: unknown process {name!r}; known: {', '.join(PROCESS_KINDS)}")
        if kind.command not in available:
            skipped.append(name)
            continue
        port = ops.metrics_ports.get(name, 0)
        env = {**base_env, **_metrics_env(kind, name, port, config)} if port else dict(base_env)
        if name in threads:
            env["OMP_NUM_THREADS"] = str(threads[name])
        if kind.metrics_on_api:
            url = serve_url(config)
        else:
            url = f"http://127.0.0.1:{port}/metrics" if port else None
        argv = [sys.executable, "-m", "slca", *global_argv, kind.command]
        stop_first_s = final_round_stop_s(ops) if name in FINAL_ROUND_FIRST else 0.0
        ready_url = url + "/readyz" if kind.metrics_on_api else None
        specs.append(
            ProcessSpec(
                name,
                argv,
                log_dir / f"{name}.log",
                env,
                url,
                ready_url,
                stop_group=kind.stop_group,
                log_max_bytes=ops.log_max_bytes,
                log_backups=ops.log_backups,
                stop_first_s=stop_first_s,
                nice=ops.training_nice if name in TRAINING else 0,
            )
        )
    return with_candidate_replica(config, specs, threads), skipped


CANDIDATE = "serve-candidate"
"""The second serve process with `ops.candidate_replica` (role "candidate")."""


def with_candidate_replica(
    config: Config, specs: list[ProcessSpec], threads: dict[str, int] | None = None
) -> list[ProcessSpec]:
    """With `ops.candidate_replica` (and `serve.follow_candidate` off): `serve` as the promoted replica and, right
    after it, `serve-candidate` — the same command, environment and supervision (readiness, restarts, stop, memory),
    role "candidate" on its own port; its own id and advertised address where the configuration names serve's; its
    own OMP_NUM_THREADS where `threads` (`split_threads`) names it, else serve's. Otherwise the plan unchanged."""
    ops = config.get(OpsSettings)
    url = candidate_url(config, ops)
    at = next((i for i, s in enumerate(specs) if s.name == "serve"), None)
    if url is None or at is None:
        return specs
    serve = specs[at]
    command, head = serve.argv[-1], serve.argv[:-1]  # `slca [--config …] [--set …] serve`: later --set wins
    promoted = replace(serve, argv=[*head, "--set", "serve.role=promoted", command])
    port = candidate_port(config, ops)
    sets = ["serve.role=candidate", f"serve.port={port}", *_identity_sets(config, port)]
    env = dict(serve.env)
    if threads and CANDIDATE in threads:
        env["OMP_NUM_THREADS"] = str(threads[CANDIDATE])
    candidate = replace(
        serve,
        name=CANDIDATE,
        argv=[*head, *(a for s in sets for a in ("--set", s)), command],
        env=env,
        log_path=serve.log_path.with_name(f"{CANDIDATE}.log"),
        url=url,
        ready_url=url + "/readyz",
    )
    return [*specs[:at], promoted, candidate, *specs[at + 1 :]]


def _identity_sets(config: Config, port: int) -> list[str]:
    """serve's explicit `replica_id` and `advertise_url`, made the candidate replica's own (its default id and address
    differ by the port already)."""
    serve, out = config.section("serve"), []
    if serve.replica_id:
        out.append(f"serve.replica_id={serve.replica_id}-candidate")
    if serve.advertise_url:
        parts = urlsplit(serve.advertise_url)
        host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
        out.append(f"serve.advertise_url={parts._replace(netloc=f'{host}:{port}').geturl()}")
    return out


TRAINING = ("learn",)
"""Processes started `ops.training_nice` nicer (the warm start too: warm_stage.py)."""

FINAL_ROUND_FIRST = ("feed", "learn")
"""Stopped before the others when the feed runs the probe's final round at a stop: the feed for its round, the
learner so that no new version is published meanwhile."""


def final_round_stop_s(ops: OpsSettings) -> float:
    """How long a stop waits for the feed's final probe round before it stops the rest (0: no final round): the
    round's bound, the feed's own stop grace, and `shutdown_grace_s` for the feed to exit."""
    if not ops.probe_enabled or ops.probe_final_timeout_s <= 0 or "feed" not in ops.processes:
        return 0.0
    return ops.probe_final_timeout_s + ops.feed_stop_grace_s + ops.shutdown_grace_s


def known_sections() -> list[str]:
    return list(sections())
