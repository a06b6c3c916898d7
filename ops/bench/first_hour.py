"""`slca bench first-hour`: a new user's first hour, timed by code. It launches `slca up` as `make run` does (the
configuration and `--set`s given to the bench, on this machine's model cache as it is: fresh — no warm start yet —
or not) and measures, in seconds from the launch:

- `ready_s`: serve's `/readyz` first answers 200;
- `first_answer_s`: the first `/v1/chat/completions` answered (a caller's request, no key: the promoted version),
  with the version that answered (`X-SLCA-Policy-Version`);
- `warm_start_served_s`: the warm start trained beside serving is served — its version promoted for callers and
  the candidate's (`GET /v1/versions`, and `<data_dir>/warm-start.json`); null when none ran (it was cached);
  with where its time went, from that record's own times: `warm_start_trained_s` (its budget spent, after
  `warm_start_steps` steps), `warm_start_saved_s` (the after-check, if any, and the save), `warm_start_published_s`
  (sealed as a weight version), and the phase it was in at the last poll (`warm_start_phase`);
- `feed_started_s`, `learner_started_s`: the held processes started (`<data_dir>/up-state.json`);
- `first_learner_step_s`: the first row of the learner's `stats:learner` stream, with its step and version; and
  `first_learner_version_s`: the first version published after the warm start's (on a fresh machine, only once the
  warm start's own version is known: it is published before it is served); `first_learner_version_served_s`: that
  version served as the candidate (`GET /v1/versions`; with `ops.candidate_replica`, serve-candidate's: serve then
  holds the promoted version) — the served policy moved by learning.

It stops once a learner's version is served (or after `--timeout-minutes`), stops `slca up` (SIGTERM; the probe's
final round is skipped: `ops.probe_final_timeout_s=0`, which changes nothing measured) and writes `results.json` and
`results.md` into `--out`, every figure from the records above. Nothing here changes how the system runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

TIMELINE = (
    ("ready_s", "serve ready (/readyz 200)"),
    ("first_answer_s", "first chat answer"),
    ("warm_start_trained_s", "warm start trained (its budget spent)"),
    ("warm_start_saved_s", "warm start checked and saved"),
    ("warm_start_published_s", "warm start published as a weight version"),
    ("warm_start_served_s", "warm start served (promoted + candidate)"),
    ("feed_started_s", "feed started"),
    ("learner_started_s", "learner started"),
    ("first_learner_step_s", "first learner step"),
    ("first_learner_version_s", "first version the learner published"),
    ("first_learner_version_served_s", "first learner version served (candidate)"),
)


@dataclass
class FirstHour:
    fresh: bool
    """No warm start in the model cache at the launch: it trains beside serving in this run."""
    ready_s: float | None = None
    first_answer_s: float | None = None
    first_answer_version: int | None = None
    warm_start_served_s: float | None = None
    warm_start_version: int | None = None
    warm_start_steps: int | None = None
    warm_start_trained_s: float | None = None
    warm_start_saved_s: float | None = None
    warm_start_published_s: float | None = None
    warm_start_phase: str | None = None
    feed_started_s: float | None = None
    learner_started_s: float | None = None
    first_learner_step_s: float | None = None
    first_learner_step: dict | None = None
    first_learner_version_s: float | None = None
    first_learner_version: int | None = None
    first_learner_version_served_s: float | None = None
    timed_out: bool = False
    stop_exit: int | None = None
    notes: list[str] = field(default_factory=list)

    def done(self) -> bool:
        return self.first_learner_step_s is not None and self.first_learner_version_served_s is not None


def http_json(url: str, body: dict | None = None, timeout: float = 120.0) -> tuple[int, dict, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"{}"), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, {}, dict(exc.headers or {})


def first_answer(api: str) -> tuple[bool, int | None]:
    """One caller's chat request; (answered, the version that answered)."""
    try:
        status, models, _ = http_json(api + "/v1/models", timeout=10)
        if status != 200:
            return False, None
        body = {"model": models["data"][0]["id"], "messages": [{"role": "user", "content": "What can you do?"}],
                "max_tokens": 16}  # fmt: skip
        status, answer, headers = http_json(api + "/v1/chat/completions", body)
    except (OSError, ValueError, KeyError, IndexError):
        return False, None
    version = headers.get("X-SLCA-Policy-Version")
    return status == 200 and bool(answer.get("choices")), int(version) if version else answer.get("policy_version")


class Watch:
    """Reads what `slca up` in `data_dir` shows: its state file, serve (and serve-candidate), the warm start's record,
    Redis. `candidate_api`: serve-candidate's base URL when `slca up` runs one (`ops.candidate_replica`), else None:
    `api` answers both roles."""

    def __init__(
        self, data_dir: Path, api: str, prefix: str, redis_url: str | None, candidate_api: str | None = None
    ) -> None:
        self.data_dir, self.api, self.prefix, self.redis_url = data_dir, api.rstrip("/"), prefix, redis_url
        self.candidate_api = candidate_api.rstrip("/") if candidate_api else None
        self.client = None

    def processes(self) -> dict[str, dict]:
        from ops.common.up_state import read_state, state_path

        state = read_state(state_path(self.data_dir)) or {}
        return {p["name"]: p for p in state.get("processes", [])}

    def ready(self) -> bool:
        from ops.bench.slca_up import ready

        return ready(self.api)

    def served_versions(self) -> dict | None:
        """serve's `/v1/versions` (the promoted version callers get)."""
        return _versions(self.api)

    def candidate_versions(self) -> dict | None:
        """The `/v1/versions` of the replica that serves the candidate: serve-candidate's, else serve's. A promoted
        replica reports its promoted version as the candidate: the learner's versions show only on serve-candidate."""
        return _versions(self.candidate_api) if self.candidate_api else self.served_versions()

    def redis(self):
        if self.client is None:
            import redis

            from ops.common.up_state import state_path, up_redis_url, read_state

            url = self.redis_url or up_redis_url(str(self.data_dir), read_state(state_path(self.data_dir)))
            if url is None:
                return None
            self.client = redis.Redis.from_url(url, socket_timeout=2.0)
        return self.client

    def first_learner_step(self) -> dict | None:
        from slca.contracts import Streams
        from slca.contracts.queues import STATS_LEARNER

        try:
            rows = self.redis().xrange(Streams(self.prefix).stats(STATS_LEARNER), count=1) if self.redis() else []
        except Exception:  # noqa: BLE001 - Redis starting, restarting: the next poll reads it
            return None
        if not rows:
            return None
        fields = {k.decode(): v.decode() for k, v in rows[0][1].items()}
        return {k: fields.get(k) for k in ("step", "version", "ts", "groups")}

    def latest_version(self) -> int | None:
        from slca.contracts import Streams, WeightManifest

        try:
            raw = self.redis().get(Streams(self.prefix).weights_latest) if self.redis() else None
            return WeightManifest.model_validate_json(raw).version if raw else None
        except Exception:  # noqa: BLE001 - as above
            return None


def _versions(api: str) -> dict | None:
    try:
        status, body, _ = http_json(api + "/v1/versions", timeout=10)
    except OSError:
        return None
    return body if status == 200 else None


def make_watch(config, data_dir: Path) -> Watch:
    """The watch of `slca up` run with `config`: callers' address (`ops.feed_url`, else serve's) and serve-candidate's
    where it runs one (`ops/common/serve_urls.py`, the addresses `slca up` gives its processes)."""
    from ops.common.serve_urls import candidate_url, serve_url
    from ops.settings import OpsSettings

    ops = config.get(OpsSettings)
    common = config.common
    return Watch(
        data_dir, ops.feed_url or serve_url(config), common.stream_prefix, common.redis_url, candidate_url(config, ops)
    )


def measure(watch: Watch, result: FirstHour, started: float, up: subprocess.Popen, timeout_s: float, poll_s: float):
    """Poll until the first learner step and a learner's version served (or the timeout, or `slca up` exiting); fill
    `result` in place."""
    from ops.experiments.warmstart.progress import read_record

    def since() -> float:
        return round(time.time() - started, 1)

    while not result.done():
        if up.poll() is not None:
            result.notes.append(f"slca up exited with status {up.returncode} before a learner's version was served")
            return
        if time.time() - started > timeout_s:
            result.timed_out = True
            return
        procs = watch.processes()
        if result.ready_s is None and watch.ready():
            result.ready_s = since()
        if result.ready_s is not None and result.first_answer_s is None:
            answered, version = first_answer(watch.api)
            if answered:
                result.first_answer_s, result.first_answer_version = since(), version
        if result.fresh and result.warm_start_served_s is None:
            record, versions = read_record(watch.data_dir), watch.served_versions()
            note_warm_start(result, record, started)
            if record is not None and record.version is not None and versions is not None:
                candidate = (watch.candidate_versions() or {}).get("candidate")
                if versions.get("promoted") == record.version == candidate:
                    result.warm_start_served_s, result.warm_start_version = since(), record.version
        for name, attr in (("feed", "feed_started_s"), ("learn", "learner_started_s")):
            if getattr(result, attr) is None and (procs.get(name) or {}).get("pid"):
                setattr(result, attr, since())
        # on a fresh machine the warm start's version is published before it is served: until its number is known, a
        # newer version is not the learner's
        if result.first_learner_version_s is None and (not result.fresh or result.warm_start_version is not None):
            latest = watch.latest_version()
            if latest is not None and latest > (result.warm_start_version or 0):
                result.first_learner_version_s, result.first_learner_version = since(), latest
        if result.first_learner_version is not None and result.first_learner_version_served_s is None:
            served = (watch.candidate_versions() or {}).get("candidate")
            if served is not None and served >= result.first_learner_version:
                result.first_learner_version_served_s = since()
        if result.first_learner_step_s is None and (step := watch.first_learner_step()) is not None:
            result.first_learner_step_s, result.first_learner_step = since(), step
        time.sleep(poll_s)


def note_warm_start(result: FirstHour, record, started: float) -> None:
    """The warm start's phase and the times its record gives, as seconds from the launch."""
    if record is None:
        return
    result.warm_start_phase, result.warm_start_steps = record.phase, record.step
    for attr, at in (("warm_start_trained_s", record.trained_at), ("warm_start_saved_s", record.saved_at),
                     ("warm_start_published_s", record.published_at)):  # fmt: skip
        if at is not None:
            setattr(result, attr, round(at - started, 1))


def write_results(out: Path, result: FirstHour, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({**meta, "result": asdict(result)}, indent=1))
    kind = "fresh machine (warm start beside serving)" if result.fresh else "warm start cached"
    lines = [
        f"# slca bench first-hour — {kind}",
        "",
        f"`{meta['command']}` · {meta['machine']['cpu']}, {meta['machine']['cores']} cores, load "
        f"{meta['machine']['load_average_1m']} at the start",
        "",
        "| from the launch of `slca up` | seconds |",
        "|---|---:|",
    ]
    for key, label in TIMELINE:
        value = getattr(result, key)
        lines.append(f"| {label} | {'-' if value is None else f'{value:.0f}'} |")
    if result.warm_start_phase is not None:
        lines += ["", f"Warm start: {result.warm_start_steps} steps; last seen {result.warm_start_phase}."]
    if result.timed_out:
        lines += ["", f"Timed out after {meta['timeout_minutes']:g} minutes."]
    lines += ["", *(f"- {n}" for n in result.notes)]
    (out / "results.md").write_text("\n".join(lines).rstrip() + "\n")


def run_first_hour(args, config) -> int:
    from ops.bench.common import bench_command
    from ops.common.machine import machine_facts
    from ops.bench.slca_up import set_args, sigterm_as_interrupt, stop
    from ops.experiments.warmstart.model import needs_warm_start
    from ops.run.supervisor.up import global_argv
    from ops.settings import OpsSettings

    common = config.common
    data_dir = Path(common.data_dir).resolve()
    result = FirstHour(fresh=needs_warm_start(config) and config.get(OpsSettings).warm_start_beside)
    argv = [sys.executable, "-m", "slca", *global_argv(args), *set_args(["ops.probe_final_timeout_s=0"]), "up"]
    watch = make_watch(config, data_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    # slca up's own output stays with the run's data, not in --out: it names this machine's paths, --out is committed
    up_log = data_dir / "logs" / "first-hour-up.out"
    up_log.parent.mkdir(parents=True, exist_ok=True)
    with open(up_log, "wb") as log, sigterm_as_interrupt():
        up = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            measure(watch, result, started, up, 60 * args.timeout_minutes, args.poll_s)
        except KeyboardInterrupt:
            result.notes.append("interrupted")
        finally:
            stop(up)
            result.stop_exit = up.returncode
    meta = {
        "command": bench_command("first-hour", sys.argv),
        "machine": machine_facts(),
        "timeout_minutes": args.timeout_minutes,
        "started_at": started,
    }
    write_results(args.out, result, meta)
    print((args.out / "results.md").read_text())
    return 0 if result.done() else 1
