"""`slca up`: the whole system under one supervisor.

Plan: (1) Redis — the configured one, or an owned `redis-server` (AOF, `noeviction`, a memory budget computed from
the settings: ops/run/supervisor/redis_budget.py) under `<data_dir>/redis`, started again if it dies (redis_watch.py);
(2) the environment every child shares (Redis URL, admin token, the feed's record key, model); (3) one process
per registered component command, each with its own log; (4) supervise until Ctrl-C / SIGTERM, showing a live
status table; (5) stop the children (process groups: SIGTERM, grace, SIGKILL), then Redis.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Callable

import redis

from ops.observe.scrape import sample_value, scrape
from ops.observe.redis_view import read_snapshot
from ops.settings import OpsSettings
from ops.run.supervisor.plan import build_specs
from ops.run.supervisor.process import Backoff, ProcessState
from ops.observe.memory import SystemMemory, memory_lines
from ops.run.supervisor.readiness import ReadinessPolicy
from ops.run.supervisor.redis_budget import owned_maxmemory
from ops.run.supervisor.redis_watch import RedisWatch
from ops.common.up_state import describe, owned_redis_url_path, state_path, write_secret, write_state
from ops.run.supervisor.supervisor import Supervisor
from ops.run.supervisor.table import process_table, system_lines
from ops.experiments.warmstart.model import ensure_warm_start, needs_warm_start, warm_model_dir
from ops.run.supervisor.warm_stage import WarmStartWatch, make_prepare, plan_beside
from slca.cli import CliError
from slca.config import OVERRIDES_ENV, Config, split_overrides
from slca.models.paths import is_model_dir
from slca.redaction import redact_url
from slca.redis_server import RedisServer

log = logging.getLogger("slca.up")

WEIGHTS_KEY_FILE = "weights-key"
"""The generated `weights.key`, owner-only in the data dir, kept across runs (`lasting_secret`)."""


def run_up(args, config: Config) -> int:
    common, ops = config.common, config.get(OpsSettings)
    check_sim(config)
    check_model(config)
    data_dir = Path(common.data_dir).resolve()  # redis-server chdirs into its --dir: relative paths break
    data_dir.mkdir(parents=True, exist_ok=True)
    beside = warm_start_beside(config)
    if not beside:  # the warm start first (when one is needed), serving after it
        ensure_warm_start(config, global_argv(args), secret_env(args))
    owned_redis = None if common.redis_url else start_owned_redis(ops, data_dir, config)
    redis_url = common.redis_url or owned_redis.url
    try:
        env, model_note = child_env(config, redis_url, data_dir)
        env.update(secret_env(args))
        specs, skipped = build_specs(config, global_argv(args), env, data_dir / "logs", warm_start=beside)
        for name in skipped:
            log.warning("skipping %s: the `slca %s` command is not registered (component not built yet)", name, name)
        if beside:
            specs = plan_beside(config, global_argv(args), env, data_dir, specs)
            model_note = (
                f"{model_note}, serving now; the warm start (`slca sft`, {ops.warm_start_minutes:g} min) trains "
                f"beside it into {warm_model_dir(config)} and is swapped in as a new version when done "
                "(the feed and the learner start then)"
            )
        supervisor = Supervisor(
            specs,
            backoff_of(ops),
            grace_s=ops.shutdown_grace_s,
            readiness=ReadinessPolicy(ops.ready_probe_interval_s, ops.ready_start_grace_s, ops.unready_grace_s),
            prepare=make_prepare(data_dir) if beside else None,
        )
        install_stop_handlers(supervisor)
        redis_watch = RedisWatch(owned_redis, backoff_of(ops)) if owned_redis is not None else None
        print_banner(
            supervisor,
            redact_url(redis_url),
            owned_redis,
            model_note,
            data_dir,
            "SLCA_ADMIN_TOKEN" in env,
            "SLCA_RECORD_KEY" in env,
        )
        reporter = StatusReporter(
            redis_url,
            common.stream_prefix,
            state_path(data_dir),
            ops.status_interval_s,
            extra={"redis_url": redact_url(redis_url), "data_dir": str(data_dir)},
            redis_pid=(lambda: redis_watch.pid) if redis_watch is not None else None,
            details=WarmStartWatch(data_dir).details if beside else None,
        )
        if getattr(args, "duration", None):
            stop_after(supervisor, args.duration)
        supervisor.run(on_tick=ticks(redis_watch, reporter), tick_every_s=1.0)
        reporter(supervisor, final=True)
        print(stop_table(supervisor), flush=True)
    finally:
        if owned_redis is not None:
            owned_redis.stop()
    print("slca up: stopped", flush=True)
    return 0


def check_sim(config: Config) -> None:
    """The `[sim]` section, its world seed read in full (`sim.world_seed`), before anything starts: a wrong value is
    one clear error here rather than a serve child that fails at its start and is restarted again and again."""
    try:
        config.section("sim")
    except ModuleNotFoundError:
        return  # no sim component: serve answers tool calls with a structured 501 (serve/tools.py)


MODEL_USERS = ("serve", "learn")
"""Processes that load the model: `slca up` runs none of them without one."""


def check_model(config: Config) -> None:
    """The model to serve and train is on disk before anything starts: without it serve exited at its start again and
    again and the warm start failed, while `slca up` said it was serving (a `slca bench soak` on a fresh cache waited
    minutes for a system that could never be ready)."""
    if not set(MODEL_USERS) & set(config.get(OpsSettings).processes):
        return  # e.g. a host of workers only
    explicit = "model" in config.raw.get("common", {})
    if not explicit and is_model_dir(warm_model_dir(config)):
        return  # the warm start is served (and the base model no longer needed)
    path = config.common.model_path()
    if not is_model_dir(path):
        how = "set common.model to a model directory" if explicit else "run `slca model fetch` (`make run` does)"
        raise CliError(f"no model at {path}: {how}")


def warm_start_beside(config: Config) -> bool:
    """The warm start trains beside serving in this run (`ops.warm_start_beside`, ops/run/supervisor/warm_stage.py):
    one is needed and serve is one of the processes."""
    ops = config.get(OpsSettings)
    return ops.warm_start_beside and "serve" in ops.processes and needs_warm_start(config)


def start_owned_redis(ops: OpsSettings, data_dir: Path, config: Config) -> RedisServer:
    """The owned redis-server: AOF, a password, a memory budget computed from the settings and no eviction
    (OpsSettings). Its URL (password included) goes to an owner-only file for `slca status`; the state file and
    banner show it redacted."""
    password = ops.redis_password or secrets.token_urlsafe(24)
    server = RedisServer(
        data_dir / "redis",
        appendonly=True,
        appendfsync=ops.redis_appendfsync,
        password=password,
        maxmemory=owned_maxmemory(ops.redis_maxmemory, config),
        maxmemory_policy=ops.redis_maxmemory_policy,
    ).start()
    write_secret(owned_redis_url_path(data_dir), server.url)
    return server


def backoff_of(ops: OpsSettings) -> Backoff:
    """The restart back-off of the children and of the owned Redis."""
    return Backoff(ops.restart_backoff_initial_s, ops.restart_backoff_max_s, ops.restart_reset_after_s)


def ticks(redis_watch: RedisWatch | None, reporter: Callable[[Supervisor], None]) -> Callable[[Supervisor], None]:
    """The supervisor's once-a-second call: the owned Redis's watch first (a dead Redis is started again), then the
    status report."""

    def tick(supervisor: Supervisor) -> None:
        if redis_watch is not None:
            redis_watch.check()
        reporter(supervisor)

    return tick


def global_argv(args) -> list[str]:
    """The `--config` / `--set` options the user gave, forwarded so every child sees the same configuration.
    Secret overrides (`--set common.admin_token=…`) are left out: they travel in `secret_env` instead, because a
    child's argv is world-readable (`ps`) and written to its log."""
    argv = ["--config", args.config] if getattr(args, "config", None) else []
    public, _ = split_overrides(getattr(args, "set", []) or [])
    for item in public:
        argv += ["--set", item]
    return argv


def secret_env(args) -> dict[str, str]:
    """The secret `--set` overrides, as the environment variable every `slca` process applies like `--set`."""
    _, secret = split_overrides(getattr(args, "set", []) or [])
    inherited = json.loads(os.environ.get(OVERRIDES_ENV) or "[]")  # load_config has already checked its form
    return {OVERRIDES_ENV: json.dumps([*inherited, *secret])} if secret else {}


def child_env(config: Config, redis_url: str, data_dir: Path) -> tuple[dict[str, str], str]:
    from slca.weights import WeightsSettings

    common, weights = config.common, config.get(WeightsSettings)
    env = {"SLCA_REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1"}
    if not common.admin_token:
        # one token for this run: serve accepts it and the learner uses it; kept out of the state file
        env["SLCA_ADMIN_TOKEN"] = generated_secret(data_dir / "admin-token")
    if not weights.key:
        # the learner signs its weight announcements with it and serve loads only what it signed (slca/weights/);
        # kept across runs: a restart on the same data dir must still load the versions the learner published
        env["SLCA_WEIGHTS__KEY"] = lasting_secret(data_dir / WEIGHTS_KEY_FILE)
    if not common.record_key:
        # the feed's key (scope 'record'): serve records only what such a key sends, the feed sends it
        env["SLCA_RECORD_KEY"] = generated_secret(data_dir / "record-key")
    explicit_model = "model" in config.raw.get("common", {})
    warm = warm_model_dir(config)
    if not explicit_model and is_model_dir(warm):
        env["SLCA_MODEL"] = str(warm)
        note = f"{warm} (warm start written by `slca sft`)"
    elif explicit_model:
        note = f"{common.model_path()}"
    else:
        note = f"{common.model_path()} (embedded; `slca sft` writes a warm start that `slca up` then prefers)"
    return env, note


def generated_secret(path: Path) -> str:
    """A fresh secret for this run, also written (owner-only) to `path` for the operator's own clients."""
    secret = secrets.token_urlsafe(24)
    write_secret(path, secret)
    return secret


def lasting_secret(path: Path) -> str:
    """The secret kept in `path` by an earlier run (made owner-only again if it was not), else a new one written
    there (owner-only). For what must outlive a run: the weights key signs the versions kept in the data dir and the
    announcement kept in Redis (`slca:weights:latest`), which a restarted serve loads only with the same key."""
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        secret = ""
    if not secret:
        return generated_secret(path)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        log.warning("%s was readable by others; made owner-only (0600)", path)
        path.chmod(0o600)
    return secret


def install_stop_handlers(supervisor: Supervisor) -> None:
    def handler(signum, frame):
        supervisor.stop_event.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def stop_table(supervisor: Supervisor) -> str:
    """How each process ended: exit status, seconds from SIGTERM to exit, whether it had to be SIGKILLed."""
    lines = [f"{'PROCESS':<10} {'EXIT':>5}  {'STOP':>6}  SIGKILL"]
    for p in supervisor.processes:
        took = "-" if p.stop_seconds is None else f"{p.stop_seconds:.1f}s"
        exit_ = "-" if p.last_exit is None else str(p.last_exit)
        lines.append(f"{p.spec.name:<10} {exit_:>5}  {took:>6}  {'yes' if p.killed else 'no'}")
    verdict = "clean stop" if supervisor.clean_stop() else "NOT a clean stop (see the logs)"
    return "\n".join(lines + [f"slca up: {verdict}"])


def stop_after(supervisor: Supervisor, seconds: float) -> None:
    import threading

    timer = threading.Timer(seconds, supervisor.stop_event.set)
    timer.daemon = True  # a Ctrl-C before the deadline must not wait for the timer
    timer.start()


def print_banner(
    supervisor: Supervisor,
    redis_url: str,
    owned_redis,
    model_note: str,
    data_dir: Path,
    generated_token: bool,
    generated_record_key: bool = False,
) -> None:
    where = f"owned redis-server, data {owned_redis.data_dir}" if owned_redis else "configured"
    lines = [f"slca up: redis {redis_url} ({where})", f"model: {model_note}", f"logs: {data_dir / 'logs'}/"]
    for spec in supervisor.processes:
        url = f"  {spec.spec.url}" if spec.spec.url else ""
        lines.append(f"  {spec.spec.name:<10}{url}  log {spec.spec.log_path}")
    api = next((p.spec.url for p in supervisor.processes if p.spec.name == "serve"), None)
    if api:
        lines += [f"API: {api}/v1   dashboard: {api}/dashboard/ (sign in: admin token)   metrics: {api}/metrics"]
    if generated_token:
        lines.append(f"admin token (generated for this run): {data_dir / 'admin-token'}")
    if generated_record_key:
        lines.append(f"record key (the feed's; 'record' scope): {data_dir / 'record-key'}")
    lines.append("Ctrl-C stops everything.")
    print("\n".join(lines), flush=True)


LIVE = (ProcessState.RUNNING, ProcessState.STOPPING)


class StatusReporter:
    """Called once a second by the supervisor: writes the state file; redraws the table every interval."""

    def __init__(
        self,
        redis_url: str,
        prefix: str,
        path: Path,
        interval_s: float,
        extra: dict,
        redis_pid: Callable[[], int | None] | None = None,
        details: Callable[[], dict[str, str]] | None = None,
    ):
        self.client = redis.Redis.from_url(redis_url, socket_timeout=1.0)
        self.memory = SystemMemory()
        self.details = details
        """A line per process name for the table (the warm start's progress: ops/run/supervisor/warm_stage.py)."""
        self.redis_pid = redis_pid
        """The owned redis-server's pid, asked each time (it changes when Redis is started again; None while it is
        down); None for a configured Redis."""
        self.prefix = prefix
        self.path = path
        self.interval_s = interval_s
        self.extra = extra
        self.last_table = 0.0
        self.tty = sys.stdout.isatty()

    def __call__(self, supervisor: Supervisor, final: bool = False) -> None:
        # running or stopping only: an exited child's pid may already name another process
        roots = {p.spec.name: p.pid for p in supervisor.processes if p.pid and p.state in LIVE}
        if self.redis_pid is not None and (pid := self.redis_pid()):
            roots["redis"] = pid
        self.memory.sample(roots)
        details = self.details() if self.details is not None else None
        state = describe(supervisor, {**self.extra, "memory": self.memory.to_dict()}, details)
        write_state(self.path, state)
        if final or time.monotonic() - self.last_table < self.interval_s:
            return
        self.last_table = time.monotonic()
        try:
            snapshot = read_snapshot(self.client, self.prefix, n_rewards=50, n_learner=1)
        except redis.RedisError:
            snapshot = None
        api = next((p["url"] for p in state["processes"] if p["name"] == "serve"), None)
        text = scrape(api + "/metrics", 0.5) if api else None
        served = sample_value(text, "slca_policy_version") if text else None
        table = "\n".join(
            [process_table(state["processes"]), system_lines(snapshot, served), memory_lines(state["memory"])]
        )
        print(("\x1b[H\x1b[J" if self.tty else "") + table + "\n", flush=True)
