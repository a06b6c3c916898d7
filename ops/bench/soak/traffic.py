"""The load of `slca bench soak`, every part bounded in count and in time (each stops by itself at `stop_at`):

- legal clients (asyncio + aiohttp): each alternates a short chat completion and a short agent run (`record: false`);
  a 429 is retried after its Retry-After until the request's deadline;
- a hostile sender (a thread, http.client: raw headers as the hardening tests send them): one case at a time, at
  most one every `interval_s`;
- a /healthz pinger (a thread, one kept-alive connection: only the server's answer time is measured);
- a memory sampler (a thread): RSS of the system's process tree and Redis `used_memory`, the learner's step and
  version, the version serve serves — and so when the measured window begins (`Window`);
- a case runner (a thread): every hostile case of ops/bench/soak/cases.py once a round, a round every
  `cases_every_s` from the measured window's start.

The threads keep the pings and samples on time while the event loop is busy with 1 MiB bodies and responses.
The measured window's start is known only once the system is steady, so the threads time their records from the
start of the load and `rebase` makes them seconds since the window began (negative during the warm-up).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from ops.bench.hostile import AGENT, CHAT, JSON_HEADERS, HostileCase
from ops.observe.procs import TreeSampler
from ops.bench.slca_up import role_of
from ops.bench.soak.case_report import CaseResult
from ops.bench.soak.cases import Target, run_round
from ops.bench.soak.report import (
    HostileResult,
    LegalResult,
    MemorySample,
    WindowStart,
    hostile_problem,
    retry_after_s,
    steady_state,
)


@dataclass(frozen=True)
class SoakPlan:
    url: str
    """Base URL of serve (loopback only)."""
    warmup_s: float
    """Load before the measured window, at least (start-up allocations are not a leak); everything but the pings'
    percentiles and the memory windows counts from the start."""
    seconds: float
    """The measured window."""
    warmup_max_s: float = 0.0
    """The warm-up goes on past `warmup_s` until the system is steady (report.steady_state), at most this long
    (then the window begins anyway, and the report says the system never got there)."""
    clients: int = 4
    hostile_interval_s: float = 0.5
    ping_interval_s: float = 0.05
    sample_interval_s: float = 5.0
    legal_deadline_s: float = 300.0
    """A legal request not answered with 200 by then (429s retried) is unanswered (serve's engine_timeout_s)."""
    hostile_timeout_s: float = 120.0
    api_key: str | None = None
    """Sent by the legal clients only (when serving needs a key)."""
    cases_every_s: float = 300.0
    """A round of the hostile cases (ops/bench/soak/cases.py) this often from the measured window's start; 0: none."""


LEGAL_MIN_INTERVAL_S = 0.1
"""A legal client starts at most one request this often (back to back otherwise: one in flight each)."""


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def _bound(stop_at: float, interval_s: float) -> int:
    """How many rounds of `interval_s` fit before `stop_at` (+1): the count bound of a paced loop."""
    return int(max(0.0, stop_at - time.monotonic()) / interval_s) + 1


class Window:
    """The measured window of `plan.seconds`: it begins at the first memory sample at least `plan.warmup_s` into
    the load that finds the system steady (`consider`), at the latest `plan.warmup_max_s` into it. Every part of
    the load reads `t0` and `stop_at` as it goes: until the window begins they are the latest they can be."""

    def __init__(self, plan: SoakPlan, began: float):
        self.began, self.seconds = began, plan.seconds
        self.earliest = began + plan.warmup_s
        self.latest = began + max(plan.warmup_s, plan.warmup_max_s)
        self.late_s = plan.sample_interval_s + 10.0
        """How late past `latest` the sample that begins the window at the cap may come (its interval, and a slow
        sample's reads)."""
        self.t0 = self.latest
        self.start: WindowStart | None = None
        self.begun = threading.Event()
        self.baseline_version: int | None = None
        """The learner's version at the first sample that read it: the steady state needs a newer one served."""

    @property
    def stop_at(self) -> float:
        return self.t0 + self.seconds

    @property
    def last_stop(self) -> float:
        """The latest `stop_at` can be (the count bound of every loop)."""
        return self.latest + self.late_s + self.seconds

    def consider(self, now: float, sample: MemorySample) -> None:
        """Begin the window at `now` (the time `sample` was taken) when the sample finds the system steady, or when
        the cap is reached."""
        if self.baseline_version is None:
            self.baseline_version = sample.learner_version
        if self.begun.is_set() or now < self.earliest:
            return
        steady = steady_state(sample, self.baseline_version)
        if steady or now >= self.latest:
            self.t0 = now
            self.start = self._start(now - self.began, steady, sample, self.baseline_version)
            self.begun.set()

    def _start(self, at_s: float, steady: bool, sample: MemorySample | None, baseline: int | None) -> WindowStart:
        cap_s = self.latest - self.began
        if sample is None:
            return WindowStart(at_s, steady, cap_s, baseline_version=baseline)
        read = (sample.learner_step, sample.learner_version, sample.served_version)
        return WindowStart(at_s, steady, cap_s, *read, baseline_version=baseline)

    def started(self) -> WindowStart:
        """When and why it began (no sample began it — the sampler stopped — : at the cap, not steady)."""
        return self.start or self._start(self.latest - self.began, False, None, self.baseline_version)


def rebase(window: Window, samples: list[MemorySample], pings: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The samples (in place) and the pings (a new list) timed from the measured window's start instead of the
    load's."""
    shift = window.started().warmup_s
    for sample in samples:
        sample.t_s -= shift
    return [(t - shift, latency) for t, latency in pings]


# --- legal clients -------------------------------------------------------------------------------
def legal_body(kind: str, task, seed: int) -> tuple[str, dict]:
    if kind == "chat":
        return CHAT, {"messages": task.messages, "max_tokens": 16, "seed": seed}
    return AGENT, {
        "task_id": task.task_id,
        "messages": task.messages,
        "tools": task.tools,
        "n": 2,
        "max_tokens": 32,
        "max_turns": 2,
        "record": False,
        "seed": seed,
    }


async def _answer(session, url: str, kind: str, body: dict, deadline_s: float) -> LegalResult:
    """POST until a 200 (retrying each 429 after its Retry-After) or the deadline; any other answer ends it."""
    import aiohttp

    started, statuses, data = time.monotonic(), [], json.dumps(body)
    while (left := deadline_s - (time.monotonic() - started)) > 0:
        try:
            async with session.post(url, data=data, timeout=aiohttp.ClientTimeout(total=left)) as r:
                raw = await r.read()
                statuses.append(r.status)
                if r.status == 200:
                    payload = json.loads(raw)
                    ok = bool(payload.get("choices" if kind == "chat" else "runs"))
                    return LegalResult(
                        kind,
                        ok,
                        statuses,
                        time.monotonic() - started,
                        None if ok else f"200 without {kind} output: {raw[:200]!r}",
                    )
                if r.status != 429:
                    return LegalResult(
                        kind,
                        False,
                        statuses,
                        time.monotonic() - started,
                        f"HTTP {r.status}: {raw[:200].decode(errors='replace')}",
                    )
                wait = retry_after_s(r.headers.get("Retry-After"))
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            return LegalResult(kind, False, statuses, time.monotonic() - started, f"{type(exc).__name__}: {exc}"[:200])
        await asyncio.sleep(min(wait, max(0.0, deadline_s - (time.monotonic() - started))))
    return LegalResult(kind, False, statuses, time.monotonic() - started, f"no 200 within {deadline_s:g}s")


async def _client(session, plan: SoakPlan, k: int, tasks: list, window: Window, out: list[LegalResult]) -> None:
    for i in range(_bound(window.last_stop, LEGAL_MIN_INTERVAL_S)):
        if (began := time.monotonic()) >= window.stop_at:
            return
        kind = ("chat", "agent")[(i + k) % 2]
        path, body = legal_body(kind, tasks[(k + i * plan.clients) % len(tasks)], seed=k * 1_000_000 + i)
        out.append(await _answer(session, plan.url + path, kind, body, plan.legal_deadline_s))
        await asyncio.sleep(max(0.0, LEGAL_MIN_INTERVAL_S - (time.monotonic() - began)))  # a failing server: paced


async def legal_traffic(plan: SoakPlan, tasks: list, window: Window) -> list[LegalResult]:
    """K clients until the window's end; a request in flight then still gets its deadline."""
    import aiohttp

    headers = {**JSON_HEADERS, **({"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {})}
    out: list[LegalResult] = []
    async with aiohttp.ClientSession(headers=headers) as session:
        await asyncio.gather(*(_client(session, plan, k, tasks, window, out) for k in range(plan.clients)))
    return out


# --- threads -------------------------------------------------------------------------------------
class _Paced(threading.Thread):
    """A loop of `step()` every `interval_s` until the window's end (or `stop()`), bounded in count."""

    def __init__(self, name: str, interval_s: float, window: Window):
        super().__init__(name=name, daemon=True)
        self.interval_s, self.window, self.halt = interval_s, window, threading.Event()

    def run(self) -> None:
        try:
            for i in range(_bound(self.window.last_stop, self.interval_s)):
                if self.halt.is_set() or time.monotonic() >= self.window.stop_at:
                    break
                began = time.monotonic()
                self.step(i)
                self.halt.wait(max(0.0, self.interval_s - (time.monotonic() - began)))
        finally:
            self.close()

    def step(self, i: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def stop(self, timeout_s: float) -> None:
        self.halt.set()
        self.join(timeout=timeout_s)


class HostileSender(_Paced):
    def __init__(self, url: str, cases: list[HostileCase], plan: SoakPlan, window: Window):
        super().__init__("soak-hostile", plan.hostile_interval_s, window)
        self.host, self.port = _host_port(url)
        self.cases, self.timeout_s = cases, plan.hostile_timeout_s
        self.results: list[HostileResult] = []

    def step(self, i: int) -> None:
        case = self.cases[i % len(self.cases)]
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        began = time.monotonic()
        try:
            conn.request("POST", case.path, case.body, case.headers)
            response = conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.results.append(
                HostileResult(
                    case.name, None, False, time.monotonic() - began, False, f"{type(exc).__name__}: {exc}"[:200]
                )
            )
            return
        finally:
            conn.close()
        seconds = time.monotonic() - began
        problem = hostile_problem(case.statuses, response.status, raw)
        self.results.append(
            HostileResult(case.name, response.status, problem is None, seconds, seconds > case.max_seconds, problem)
        )


class Pinger(_Paced):
    def __init__(self, url: str, plan: SoakPlan, window: Window):
        super().__init__("soak-healthz", plan.ping_interval_s, window)
        self.host, self.port = _host_port(url)
        self.conn: http.client.HTTPConnection | None = None
        self.pings: list[tuple[float, float]] = []
        """(seconds since the load began, latency); `rebase` times them from the measured window's start."""
        self.failures: dict[str, int] = {}

    def step(self, i: int) -> None:
        try:
            if self.conn is None:  # connected before the clock starts: only the server's answer is timed
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=5.0)
                self.conn.connect()
            began = time.perf_counter()
            self.conn.request("GET", "/healthz")
            response = self.conn.getresponse()
            response.read()
            latency = time.perf_counter() - began
        except (OSError, http.client.HTTPException) as exc:
            self.failures[type(exc).__name__] = self.failures.get(type(exc).__name__, 0) + 1
            self.close()
            return
        if response.status == 200:
            self.pings.append((time.monotonic() - self.window.began, latency))
        else:
            self.failures[str(response.status)] = self.failures.get(str(response.status), 0) + 1

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def served_version(url: str, timeout_s: float = 2.0) -> int | None:
    """The version serve at `url` serves (its /readyz `policy_version`); None: not ready, or no answer."""
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=timeout_s) as r:
            version = json.load(r).get("policy_version")
    except (OSError, ValueError, AttributeError):
        return None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


class MemorySampler(_Paced):
    def __init__(
        self,
        roots: list[int],
        redis_url: str | None,
        plan: SoakPlan,
        window: Window,
        learner_stream: str | None = None,
    ):
        """`learner_stream`: the `stats:learner` stream whose newest entry says the learner's step and version.
        Each sample also reads the version serve serves (`plan.url`), and may begin the measured window."""
        super().__init__("soak-memory", plan.sample_interval_s, window)
        self.tree = TreeSampler(roots, role_of) if roots else None
        self.client, self.learner_stream, self.url = None, learner_stream, plan.url
        if redis_url:
            import redis

            self.client = redis.Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.samples: list[MemorySample] = []
        """Timed from the start of the load; `rebase` times them from the measured window's start."""

    def step(self, i: int) -> None:
        import redis

        rss, by_role = None, {}
        if self.tree is not None:
            self.tree.sample()
            rss, by_role = self.tree.last_rss_bytes, dict(self.tree.last_rss_by_role)
        used, learner = None, (None, None)
        if self.client is not None:
            try:
                used = int(self.client.info("memory")["used_memory"])
                learner = self._learner()
            except redis.RedisError:
                pass  # recorded as a missing sample (None): a gap, not a zero
        served = served_version(self.url)
        now = time.monotonic()
        sample = MemorySample(now - self.window.began, rss, used, by_role, *learner, served_version=served)
        self.samples.append(sample)
        self.window.consider(now, sample)

    def _learner(self) -> tuple[int | None, int | None]:
        """(step, version) of the newest `stats:learner` entry; (0, 0) before the first step."""
        from slca.contracts import ContractError
        from slca.contracts.stats import LearnerStepStats

        if self.learner_stream is None:
            return None, None
        newest = self.client.xrevrange(self.learner_stream, count=1)
        if not newest:
            return 0, 0
        try:
            entry = LearnerStepStats.from_fields(newest[0][1])
        except ContractError:
            return None, None
        return entry.step, entry.version

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


class CaseRunner(threading.Thread):
    """A round of the hostile cases every `plan.cases_every_s` from the measured window's start (waited for); no
    round or case starts at or after the window's end. A round takes about a minute (the trickled body alone waits
    for serve.body_read_timeout_s)."""

    def __init__(self, target: Target, plan: SoakPlan, window: Window):
        super().__init__(name="soak-cases", daemon=True)
        self.target, self.interval_s, self.window = target, plan.cases_every_s, window
        self.halt = threading.Event()
        self.results: list[CaseResult] = []

    def run(self) -> None:
        if self.interval_s <= 0:
            return
        # the window begins by the cap (and its sample) at the latest; past that (the sampler stopped) at the cap
        for _ in range(_bound(self.window.latest + self.window.late_s, 1.0)):
            left = self.window.latest + self.window.late_s - time.monotonic()
            if self.window.begun.is_set() or left <= 0:
                break
            if self.halt.wait(min(1.0, left)):
                return
        t0, stop_at = self.window.t0, self.window.stop_at
        rounds = int(max(0.0, stop_at - t0) / self.interval_s) + 1
        for k in range(rounds):
            at = t0 + k * self.interval_s
            if at >= stop_at or self.halt.wait(max(0.0, at - time.monotonic())):
                return
            for result in run_round(self.target, t0, until=stop_at, turn=k):
                self.results.append(result)
                if self.halt.is_set():
                    return

    def stop(self, timeout_s: float) -> None:
        self.halt.set()
        self.join(timeout=timeout_s)
