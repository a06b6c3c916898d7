"""`slca bench soak`: minutes of mixed legal traffic plus hostile bodies against `slca up`, then a verdict.

Plan: (1) the system — by default `slca up` started here on a temporary data directory (its own Redis, serve on a
free port, the configuration given to this command, the warm start as `make run` has it: `soak_sets`); with
`--url`, a running `slca up` on this machine (its state file and Redis URL are read from `common.data_dir`, as
`slca status` does); (2) the load (ops/bench/soak/traffic.py) for a warm-up and then the measured window — the
warm-up lasts `--warmup-minutes` and then until the system is steady (serve serves a version the learner published
meanwhile), at most `--learner-warmup-max-minutes`; (3) the verdict on four criteria (ops/bench/soak/report.py):
RSS of the whole system and Redis memory flat (first- vs last-minute median), 0 × 5xx, /healthz p99 < 100 ms, every
legal request answered — and every hostile body answered with one of its statuses, every hostile case held
(ops/bench/soak/cases.py: a round every `--cases-every-minutes`, a small chat timed beside each), and the learner
training meanwhile (steps on `stats:learner` in the measured window: a system whose learner is idle is not the one
that runs). It trains when groups teach it something: a warm-started model — the one in the cache, which `slca up`
serves at once, else one it trains beside serving before the learner starts (the warm-up's bound,
`--learner-warmup-max-minutes`, covers that and the probe's baseline of it). The soak's own `slca up` serves the
learner's versions over HTTP on loopback (`weights.bind`), so that the weight server is there to be attacked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from ops.bench.hostile import hostile_bodies, worst_bodies
from ops.common.machine import machine_facts
from ops.bench.slca_up import bench_sets, copy_logs, ready, set_args, sigterm_as_interrupt, stop, up_argv
from ops.bench.soak.case_report import case_table
from ops.bench.soak.cases import Target
from ops.bench.soak.report import summarise, table, verdict, write
from ops.bench.soak.traffic import (
    CaseRunner,
    HostileSender,
    MemorySampler,
    Pinger,
    SoakPlan,
    Window,
    legal_traffic,
    rebase,
)
from ops.common.up_state import owned_redis_url, read_state, state_path
from ops.bench.common import bench_command
from slca.config import Config, split_overrides
from slca.contracts import Streams
from slca.contracts.queues import STATS_LEARNER
from slca.redis_server import free_port
from slca.weights import WeightsSettings, fetch_token

READY_TIMEOUT_S = 900.0
"""How long a started `slca up` may take to answer /readyz (model load, engine start)."""
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class SystemNotReady(RuntimeError):
    pass


@dataclass
class System:
    url: str
    roots: list[int]
    """Processes whose trees make up the system (the supervisor: its children include the owned Redis)."""
    redis_url: str | None
    mode: str
    api_key: str | None = None
    keep_logs: bool = False
    """Set before leaving `started_system`: keep the started system's logs (a failed soak)."""
    notes: list[str] = field(default_factory=list)
    data_dir: Path | None = None
    """The system's `common.data_dir` (its logs, its weights key)."""
    weights_bind: str | None = None
    """`host:port` of the learner's weight server (None: it serves none)."""


def client_key(config: Config, data_dir: Path) -> str | None:
    """The key the legal clients send: none when serving is open (the default: nothing they send is recorded);
    else a configured key with the 'serve' scope, else the feed's record key `slca up` wrote. Never the admin
    token."""
    common = config.common
    if not common.serve_requires_key:
        return None
    serve_only = [key for key, scopes in common.api_keys.items() if scopes == ["serve"]]
    if serve_only:
        return serve_only[0]
    try:
        return common.record_key or (data_dir / "record-key").read_text().strip() or None
    except OSError:
        return None


def soak_sets(data_dir: Path, port: int, bind: str) -> list[str]:
    """The soak's `slca up`: the benches' settings with the warm start kept (the learner must have something to
    learn: a cached warm start is served at once, else one is trained beside serving first) and the learner's
    weight server on loopback (`bind`), there for the weight case to attack."""
    return [*bench_sets(data_dir, port, warm_start=True), f"weights.bind={bind}"]


@contextlib.contextmanager
def started_system(args, config: Config, bound_s: float) -> Iterator[System]:
    """`slca up` on a temporary data directory, stopped (SIGTERM, then its session SIGKILLed) on the way out —
    also when the soak itself gets SIGTERM."""
    with sigterm_as_interrupt():
        yield from _started_system(args, config, bound_s)


def _started_system(args, config: Config, bound_s: float) -> Iterator[System]:
    from ops.run.supervisor.up import global_argv, secret_env

    tmp = Path(tempfile.mkdtemp(prefix="slca-bench-soak-"))
    data_dir, port, bind = tmp / "var", free_port(), f"127.0.0.1:{free_port()}"
    sets = soak_sets(data_dir, port, bind)
    argv = up_argv([*global_argv(args), *set_args(sets)], READY_TIMEOUT_S + bound_s)
    log_path, keep = tmp / "slca-up.log", True
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **secret_env(args), "PYTHONUNBUFFERED": "1"},
        )
        try:
            system = System(f"http://127.0.0.1:{port}", [proc.pid], None, "started `slca up`")
            system.data_dir, system.weights_bind = data_dir, bind
            began = time.monotonic()
            while not ready(system.url):
                if proc.poll() is not None or time.monotonic() - began > READY_TIMEOUT_S:
                    raise SystemNotReady(f"slca up did not become ready (exit {proc.poll()})")
                time.sleep(1.0)
            system.notes.append(f"slca up ready in {time.monotonic() - began:.0f}s")
            system.redis_url = owned_redis_url(data_dir) or config.common.redis_url
            system.api_key = client_key(config, data_dir)
            yield system
            keep = system.keep_logs
        finally:
            stop(proc)
            if keep:
                kept = Path(tempfile.mkdtemp(prefix="slca-bench-soak-logs-"))
                copy_logs(data_dir / "logs", kept)
                shutil.copy(log_path, kept / "slca-up.log")
                print(f"logs of the started system: {kept}", file=sys.stderr)
            shutil.rmtree(tmp, ignore_errors=True)


def attached_system(url: str, config: Config) -> System:
    """A running `slca up` on this machine: serve at `url`, the rest from `common.data_dir`'s state file."""
    if urlsplit(url).hostname not in LOOPBACK:
        raise SystemNotReady(f"the soak only attaches to this machine (127.0.0.1), not {urlsplit(url).hostname}")
    url = url.rstrip("/")
    if not ready(url):
        raise SystemNotReady(f"{url}/readyz does not answer 200")
    data_dir = Path(config.common.data_dir)
    state = read_state(state_path(data_dir))
    roots = [int(state["supervisor_pid"])] if state and state["alive"] else []
    redis_url = config.common.redis_url or owned_redis_url(data_dir) or (state or {}).get("redis_url")
    system = System(url, roots, redis_url, "attached to a running `slca up`", client_key(config, data_dir))
    system.data_dir, system.weights_bind = data_dir, config.get(WeightsSettings).bind
    if not roots:
        system.notes.append("no live `slca up` state file in common.data_dir: RSS not measured")
    return system


def case_target(system: System, config: Config) -> Target:
    """What the hostile cases attack: serve (with its bounds), and the learner's weight server when it has one
    (its URL from `weights.url` or the bind, its fetch token from `weights.key` or the key `slca up` kept)."""
    from ops.run.supervisor.up import WEIGHTS_KEY_FILE
    from serve.settings import ServeSettings

    serve, weights = config.get(ServeSettings), config.get(WeightsSettings)
    key, log = weights.key, None
    if system.data_dir is not None:
        log = system.data_dir / "logs" / "learn.log"
        if key is None:
            with contextlib.suppress(OSError):
                key = (system.data_dir / WEIGHTS_KEY_FILE).read_text().strip() or None
    return Target(
        system.url,
        system.api_key,
        serve.body_read_timeout_s,
        serve.grammar_compile_timeout_s,
        weights.url or (f"http://{system.weights_bind}" if system.weights_bind else None),
        fetch_token(key) if key else None,
        log,
    )


def public_sets(args) -> list[str]:
    """The `--set` overrides given to `slca` (secret ones left out; a path-like value shown by its last part)."""
    public, _ = split_overrides(getattr(args, "set", None) or [])
    out = []
    for item in public:
        key, _, value = item.partition("=")
        out.append(f"{key}={Path(value).name}" if "/" in value else item)
    return out


def served_model(system: System) -> str:
    headers = {"Authorization": f"Bearer {system.api_key}"} if system.api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(system.url + "/v1/models", headers=headers), timeout=5) as r:
            return Path(json.load(r)["data"][0]["id"]).name  # a directory's name, never its path
    except (OSError, ValueError, KeyError, IndexError):
        return "?"


def drive(plan: SoakPlan, system: System, tasks: list, cases: list, target: Target, learner_stream: str | None = None):
    """Warm-up plus the measured window of load; returns the threads (their records, the samples and pings timed
    from the window's start), the legal results and the window."""
    window = Window(plan, time.monotonic())
    sampler = MemorySampler(system.roots, system.redis_url, plan, window, learner_stream)
    pinger = Pinger(system.url, plan, window)
    hostile = HostileSender(system.url, cases, plan, window)
    runner = CaseRunner(target, plan, window)
    threads = (sampler, pinger, hostile, runner)
    for thread in threads:
        thread.start()
    try:
        legal = asyncio.run(legal_traffic(plan, tasks, window))
        for thread in threads:  # each ends by itself at the window's end (the hostile sender after its request)
            thread.join(timeout=max(0.0, window.stop_at - time.monotonic()) + plan.hostile_timeout_s + 10)
    finally:
        for thread in threads:
            thread.stop(timeout_s=plan.hostile_timeout_s + 10)
    pinger.pings = rebase(window, sampler.samples, pinger.pings)
    return sampler, pinger, hostile, runner, legal, window


NOTES = [
    "measured window: begins at the first sample (every 5 s) after --warmup-minutes that finds serve serving a "
    "version the learner published since the soak began (its model and optimizer state allocated, serve swapped "
    "once), at the latest after --learner-warmup-max-minutes (then the soak fails: never steady)",
    "memory: median of the samples (every 5 s) in the measured window's first vs last minute; RSS sums "
    "the supervisor's process tree (serve, workers, assembler, learner, feed, the owned Redis)",
    "/healthz: one kept-alive connection, every 50 ms, percentiles over the measured window; 5xx, legal "
    "and hostile requests count from the start of the warm-up",
    f"a legal request is answered when it gets a 200 within {SoakPlan.legal_deadline_s:g} s, each 429 "
    "retried after its Retry-After",
    "learner: steps and versions are the newest `stats:learner` entry's at the measured window's end minus "
    "at its start, read with each memory sample",
    "hostile cases: a round every --cases-every-minutes from the measured window's start; each case held when "
    "its requests got their answers within their bounds and every small chat sent meanwhile was answered within "
    "max(3 × its time alone, its time alone + 5 s) (ops/bench/soak/cases.py); the order turns by one each round; "
    "a case whose only fault was late small chats holds unless its tries were late more often than those of the "
    "control, which sends nothing (one-sided Fisher's exact test, p < 0.05: ops/bench/soak/case_report.py)",
]
"""What every soak report says of how it measured (its `notes`, beside the system's own)."""


def valid_args(args) -> bool:
    return (
        args.minutes > 0
        and args.warmup_minutes >= 0
        and args.learner_warmup_max_minutes >= 0
        and args.clients >= 1
        and args.hostile_interval_s > 0
        and args.cases_every_minutes >= 0
    )


def soak_plan(args, system: System) -> SoakPlan:
    """The load's plan from the command's flags, for `system`."""
    warmup_s = args.warmup_minutes * 60
    return SoakPlan(
        system.url,
        warmup_s,
        args.minutes * 60,
        clients=args.clients,
        hostile_interval_s=args.hostile_interval_s,
        api_key=system.api_key,
        cases_every_s=args.cases_every_minutes * 60,
        warmup_max_s=max(warmup_s, args.learner_warmup_max_minutes * 60),
    )


def soak_header(args, cases: list) -> dict:
    """What the report says of the run before it starts (the command, its flags, the machine)."""
    return {
        "command": bench_command("soak", sys.argv),
        "minutes": args.minutes,
        "warmup_minutes": args.warmup_minutes,
        "learner_warmup_max_minutes": args.learner_warmup_max_minutes,
        "clients": args.clients,
        "hostile_interval_s": args.hostile_interval_s,
        "hostile_cases": len(cases),
        "cases_every_minutes": args.cases_every_minutes,
        **machine_facts(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "sets": public_sets(args),
    }


def quiet_start(system: System, bound_s: float, poll_s: float = 5.0) -> str | None:
    """Wait, without load, until `slca up` has started its learner: a warm start trained beside serving and the
    probe's baseline of it come first, as after `make run` on a fresh machine (nobody calls a system before its API
    serves a model worth calling). Why: under the soak's load from the start, the 6-minute warm start made 5 steps at
    72 tok/s instead of ≈ 19 (`avx512_bf16` EPYC, 2026-12-06), its held-out success was 4.4%, every group of the
    learner's first steps had zero success variance and the learner never published — a soak of an idle learner.
    Returns a note (how long it waited), or None when attached to a running system."""
    if system.data_dir is None:
        return None
    began = time.monotonic()
    while time.monotonic() - began < bound_s:
        state = read_state(state_path(system.data_dir)) or {}
        if any(p.get("name") == "learn" and p.get("pid") for p in state.get("processes", [])):
            return f"quiet start: the learner started {time.monotonic() - began:.0f} s after /readyz; load began then"
        time.sleep(poll_s)
    return f"quiet start: the learner had not started {bound_s:.0f} s after /readyz; load began anyway"


def run_soak(args, config: Config) -> int:
    from sim.tasks import load_tasks

    if not valid_args(args):
        print(
            "error: --minutes, --clients and --hostile-interval-s must be positive, --warmup-minutes, "
            "--learner-warmup-max-minutes and --cases-every-minutes ≥ 0",
            file=sys.stderr,
        )
        return 2
    tasks, cases = load_tasks("everyday", "test"), [*hostile_bodies(), *worst_bodies()]
    seconds, header = args.minutes * 60, soak_header(args, cases)
    quiet_s = max(args.warmup_minutes, args.learner_warmup_max_minutes) * 60  # `quiet_start`'s bound
    longest = quiet_s + max(args.warmup_minutes, args.learner_warmup_max_minutes) * 60 + seconds
    bound_s = longest + SoakPlan.legal_deadline_s + 180  # + the last requests' deadline, + stopping
    try:
        with (
            contextlib.nullcontext(attached_system(args.url, config))
            if args.url
            else started_system(args, config, bound_s)
        ) as system:
            plan = soak_plan(args, system)
            header.update(system=system.mode, model=served_model(system))
            print(
                f"soak: {system.mode} at {system.url}; {plan.warmup_s / 60:g}–{plan.warmup_max_s / 60:g} min "
                f"warm-up (until steady) + {args.minutes:g} min, {args.clients} legal clients, "
                f"{len(cases)} hostile cases",
                flush=True,
            )
            if waited := quiet_start(system, plan.warmup_max_s):
                print(f"soak: {waited}", flush=True)
                system.notes.append(waited)
            learner_stream = Streams(config.common.stream_prefix).stats(STATS_LEARNER)
            target = case_target(system, config)
            sampler, pinger, hostile, runner, legal, window = drive(plan, system, tasks, cases, target, learner_stream)
            header["load_average_end"] = [round(x, 2) for x in os.getloadavg()]  # before the system stops
            tried = list(runner.results) if plan.cases_every_s > 0 else None
            records = (sampler.samples, pinger.pings, pinger.failures, legal, hostile.results, tried)
            summary = summarise(seconds, *records, window=window.started())
            passed, line = verdict(summary)
            system.keep_logs = not passed
            notes = system.notes
    except SystemNotReady as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    notes += NOTES
    print(table(summary))
    if summary.cases:
        print(case_table(summary.cases))
    print(line)
    if args.out:
        write(args.out, summary, header, sampler.samples, notes)
        print(f"wrote {args.out}/results.md and results.json")
    return 0 if passed else 1
