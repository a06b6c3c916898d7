"""Settings of the supervisor (`slca up`), the task feed (`slca feed`) and evaluation (`slca eval`)."""

import re
from typing import Literal

from pydantic import Field, field_validator

from slca.config import SectionSettings
from slca.redaction import secret_field


def _default_metrics_ports() -> dict[str, int]:
    return {"worker": 9101, "assembler": 9102, "learn": 9103, "feed": 9104}


# The gate's settings live here, not in ops/run/gate/: OpsSettings inherits them and every ops room imports this
# module, so it may import no room (tests/test_import_cycles.py).
class GateSettings(SectionSettings):
    """When and on what the gate judges a candidate, and its rule (ops/run/gate/)."""

    gate_enabled: bool = True
    """Run the gate in `slca up` (process `gate`). Off: callers keep the promoted version until `slca promote`,
    unless `serve.follow_candidate` is on."""
    candidate_replica: bool = False
    """`slca up` runs one serve process per version role (`serve.role`): `serve` holds the promoted version for
    callers (the address they use) and `serve-candidate` (port `candidate_replica_port`) follows the learner's
    versions; the feed, the probe and the gate's candidate evaluation go to `serve-candidate`, the gate's promoted
    evaluation and every promotion to `serve`. So the gate holds a bad candidate back from callers with any engine
    — with vLLM, which holds one model per process, the only way on one machine. Cost: one more engine process (its
    model copy, caches and start). Ignored with `serve.follow_candidate` (callers follow the candidate anyway)."""
    candidate_replica_port: int = Field(default=0, ge=0, le=65535)
    """Port of `serve-candidate` (0: `serve.port` + 1); it listens on `serve.host` like `serve`."""
    gate_every_versions: int = Field(default=40, ge=1)
    """Judge the candidate once it is this many versions past the last one judged ..."""
    gate_every_minutes: float = Field(default=30.0, gt=0)
    """... or this many minutes after the last decision, whichever comes first (a candidate newer than the promoted
    version and than the last one judged)."""
    gate_budget_share: float = Field(default=0.10, ge=0, le=1)
    """The gate's share of the serving time at most: a due decision waits while the seconds the gate has judged, with
    this decision's estimate, would pass this share of the seconds since its first look at a ready serve (0: no
    budget). The first decision judges the promoted version too (its records are cached per version after), so it
    costs about twice a later one: in a 60-minute run (bench/online/run8) the first took 304 s, 18% of its 29 minutes
    had it gone at once."""
    gate_item_seconds: float = Field(default=1.6, gt=0)
    """Seconds per gate item per version judged, the budget's estimate until the gate has measured its own (2 cores,
    vLLM, feed held: 304 s for 2 × 96 items)."""
    gate_items: int = Field(default=96, ge=8)
    """Gate-set tasks per decision (`sim.tasks.gate`: disjoint from train, test and novel). 96 greedy agent runs
    take ≈ 3 min on 2 cores (0.52 items/s): two decisions an hour are ≈ 10% of a run's time."""
    gate_margin: float = Field(default=0.05, ge=0.0, le=1.0)
    """Non-inferiority margin: promote only when the lower bound of the paired 95% interval of candidate − promoted
    success is above −margin."""
    gate_require_better: bool = False
    """Also require the difference itself to be above 0."""
    gate_concurrency: int = Field(default=16, ge=1)
    """Gate requests in flight (the engine batches them)."""
    gate_hold_s: float = Field(default=1200.0, gt=0)
    """While the gate judges a candidate, the candidate's engine is held at its version (`POST /admin/hold`: its
    weight swaps wait) for this long at most; released as soon as the judging ends."""
    gate_holds_feed: bool = True
    """While the gate judges (the promoted version's runs and the candidate's), the training feed sends nothing new:
    the gate sets the Redis key `<prefix>:gate:feed-hold` (expiring after `gate_hold_s` for each of the two parts,
    so a gate that dies never leaves the feed held) and deletes it when the judging ends; the feed reads it about
    once a second and waits while it is set (`slca_feed_held_seconds`). On a small machine the feed's traffic
    otherwise competes with the gate's runs for the cores, and the trajectories it samples meanwhile come from a
    held candidate the learner drops as stale anyway. Off: the feed goes on while the gate judges."""
    gate_cache_warm_start: bool = True
    """Keep the warm start's records on the gate set across runs (`<cache_dir>/gate-baselines`, keyed by the model's
    content, the items, the plan and the scorer: ops/run/gate/warm_records.py), so that a later run's first decision
    judges only the candidate and, under `gate_budget_share`, comes about twice as early."""
    gate_poll_s: float = Field(default=15.0, gt=0)
    """Seconds between the gate's looks at serve's versions."""
    success_rollback_window: int = Field(default=200, ge=1)
    """Scored-success guard (ops/run/gate/success_guard.py): the latest scored trajectories of a version it compares
    (the promoted version's and the previous promoted version's, from `stats:rewards`). Wide enough for a bound of
    ≈ ±0.1 at success near 0.5, short enough to reflect the version's traffic of the last minutes to hours."""
    success_rollback_min: int = Field(default=100, ge=1)
    """Scored-success guard: scored trajectories each of the two versions needs before it is judged. Below it a
    window is a handful of tasks whose mix alone moves success by tenths (the runs this issue began from saw whole
    versions at 0.04–0.15 on 3–7 trajectories): the guard waits rather than roll back on them."""
    success_rollback_margin: float = Field(default=0.1, ge=0.0, le=1.0)
    """Scored-success guard: roll the promoted version back when the one-sided 95% upper bound (Newcombe's score
    interval) of its success minus the previous promoted version's is below −margin. Wider than `gate_margin`: the
    two windows are not paired and may come from different times and task mixes (the feed's while a version was the
    candidate, callers' since). 1.0: never roll back on success."""


class OpsSettings(GateSettings):
    status_interval_s: float = 5.0
    """Seconds between live status table refreshes."""
    processes: list[str] = Field(default_factory=lambda: ["serve", "worker", "assembler", "learn", "feed", "gate"])
    """Processes `slca up` runs, by name (each is the `slca <name>` command of its component)."""
    metrics_ports: dict[str, int] = Field(default_factory=_default_metrics_ports)
    """Prometheus port per non-HTTP process (serve exposes /metrics on its API port); 0 = off.
    `ops/observe/prometheus.yml` scrapes these defaults."""
    process_threads: dict[str, int] | None = None
    """OMP_NUM_THREADS for the named processes (e.g. {"serve": 1, "learn": 1}); one not named gets torch's default,
    a thread per core. On a small machine the two torch processes' default teams hold more threads than there are
    cores, and each team's waiting threads then take cores the other process computes on
    (ops/bench/serve/omp_wait_policy.py). None (the default): with the hf engine, serve and the learner split the
    cores this process may use (`ops.run.supervisor.plan.split_threads`; 1 and 1 on 2 cores, the rl comparison
    bench/rl/ab-hf-threads; with `candidate_replica`, serve and serve-candidate split serve's share, each at least 1);
    with vLLM, which sizes its own team (on the cores but one it keeps for its scheduler), the learner gets
    half the cores when there is no GPU (1 on 2). {}: torch's default everywhere. `serve-candidate` may be named;
    not named, it gets serve's count. `serve.torch_threads`, when set, wins for the hf engine."""
    training_nice: int = Field(default=0, ge=0, le=19)
    """`slca up` starts the learner and the warm start this much nicer (`nice -n`; 0: as nice as the rest): when
    training and serving both want the cores, serving gets them and training takes what is left. Off by default: at
    10, on a 2-core machine other work kept busy, the learner and the warm start got so little of the cores that
    neither came up within a minute (CI, 2026-12-06) — under constant serving load training would stall. Not yet
    measured what it buys serving and costs training (`python -m ops.bench.serve.omp_wait_policy --setups
    default,nice5,nice10 --seconds 60` asks it; 20-second windows hold one fp32 learner step on avx2)."""
    restart_backoff_initial_s: float = 1.0
    """Delay before the first restart of a crashed process; doubles after each further crash."""
    restart_backoff_max_s: float = 60.0
    """Upper bound of the restart delay."""
    restart_reset_after_s: float = 60.0
    """A process that stayed up this long counts as healthy again: its next crash restarts after the initial delay."""
    ready_probe_interval_s: float = 5.0
    """Seconds between readiness probes of processes that have one (serve: /readyz)."""
    ready_start_grace_s: float = 300.0
    """Time a (re)started process gets to become ready (model load, engine build) before it is restarted."""
    unready_grace_s: float = 60.0
    """A process that was ready and then fails every readiness probe for this long is restarted."""
    shutdown_grace_s: float = 15.0
    """Seconds between SIGTERM and SIGKILL when `slca up` stops its processes (all of them together). Every
    component stops well within 10 s (work in flight stays pending in Redis for the next start); the rest is margin."""
    log_max_bytes: int = Field(default=50 * 2**20, ge=0)
    """Each child's log (`<data_dir>/logs/<name>.log`) rotates once it would grow past this many bytes (0: never)."""
    log_backups: int = Field(default=3, ge=0)
    """Rotated logs kept per child: `<name>.log.1` (newest) … `<name>.log.<n>`; the oldest is dropped."""
    redis_maxmemory: str | None = "auto"
    """Memory bound of the redis-server `slca up` owns. "auto" (the default): the sum of what the configured bounds
    let Redis hold (`ops.run.supervisor.redis_budget`: the trajectory stream, the members waiting in group buckets,
    the groups stream, dead letters, the stats streams, the Celery queue, the simulator cache, the exactly-once
    markers of `workers.key_ttl_s`), printed at start. A size in Redis units ("512mb", "2gb") is used as it is (a
    warning when it is below that sum: writes then fail with OOM before the bounds hold them back); None: unbounded.
    Nothing is ever evicted (`redis_maxmemory_policy`): at the bound, writes fail loudly and producers back off."""
    redis_maxmemory_policy: str = "noeviction"
    """What that Redis does at the bound: `noeviction`, the only value accepted — writes fail (OOM) and nothing is
    evicted. Every exactly-once marker of the pipeline (member, reward, entry, emitted and dead-letter marks) carries
    a TTL, so `volatile-*` policies would evict them (a redelivered trajectory would then be scored and grouped
    twice), and `allkeys-*` ones would evict streams. Caches bound themselves instead (`sim.cache_max_bytes`)."""
    redis_budget_trajectories_per_s: float = Field(default=0.5, gt=0)
    """The highest sustained rate of recorded trajectories the "auto" budget sizes the exactly-once markers for: each
    trajectory leaves about 1.5 kB of them (its reward, membership and stream-entry marks) for `workers.key_ttl_s`."""
    redis_appendfsync: Literal["everysec", "always"] = "everysec"
    """`appendfsync` of that Redis's append-only file (`appendonly yes` in `<data_dir>/redis`, always on). If
    redis-server dies, `slca up` starts it again on that file. Redis writes a command to the file before it answers
    it, so a killed redis-server loses nothing it acknowledged — except when the disk is so slow that an fsync
    runs for over a second (Redis then postpones the write, up to 2 s). What a crash of the whole machine
    loses is what was not fsynced: the last second with "everysec"; nothing with "always", which fsyncs before every
    reply (milliseconds a write on a slow disk)."""

    @field_validator("redis_maxmemory")
    @classmethod
    def _redis_size(cls, v: str | None) -> str | None:
        if v is not None and v != "auto" and not re.fullmatch(r"\d+(b|k|kb|m|mb|g|gb)?", v.lower()):
            raise ValueError(f"{v!r}: 'auto', None or a Redis memory size (e.g. 512mb, 2gb)")
        return v

    @field_validator("redis_maxmemory_policy")
    @classmethod
    def _never_evict(cls, v: str) -> str:
        if v != "noeviction":
            raise ValueError(
                f"{v!r}: the owned Redis must not evict (the exactly-once markers carry TTLs, volatile-* would take "
                "them; allkeys-* would take streams); only 'noeviction'"
            )
        return v

    redis_password: str | None = secret_field(None)
    """`requirepass` of that Redis. None: `slca up` generates one per run. Children get it inside the Redis URL in
    their environment; `slca status` reads it from `<data_dir>/redis-url` (owner-only)."""
    warm_start_minutes: float = 6.0
    """`slca up` runs `slca sft` for this long when no warm-started model exists (0: never). The raw
    SmolLM2 never calls a tool, so online RL from it has no signal (docs/cpu-facts.md#embedded-model).
    Why 6: on a fresh 2-core machine the served version must advance — the warm start swapped in, then the learner's
    first version — within about 10 minutes of `make run`, and what follows the budget takes about 4 (the save,
    the publish and the swap, the learner's start, its first groups and step). 6 minutes are ≈ 15 steps with native
    bf16 (22–27 s a step on the `avx512_bf16` EPYC); 13 steps took parseable calls on held-out tasks from 0.00 to 0.95
    (docs/cpu-facts.md#warm-start), a start RL learns from; 15 minutes (≈ 36 steps) is a sharper start that made
    the learner's first step come after 20 minutes. With fp32 only (no `avx512_bf16`/`amx_bf16`) 6 minutes are a
    few steps: set 60 or more there."""
    warm_start_steps: int = Field(default=0, ge=0)
    """A step budget for that warm start as well (0: none): it ends when either budget is spent."""
    warm_start_min_steps: int = Field(default=12, ge=0)
    """The minutes end the warm start only after this many steps (0: no floor). Why 12: 13 steps took parseable calls
    on held-out tasks from 0.00 to 0.95 (docs/cpu-facts.md#warm-start), while a 6-minute warm start on a loaded
    `avx512_bf16` EPYC (a soak's load from the start, 2026-12-06) made 5 steps at 72 tok/s: held-out success 4.4%
    (run 9's warm start: ≈ 16%), every learner group without success variance, the learner never published. On an
    idle machine with native bf16 the 6 minutes are ≈ 19 steps and the floor does not bind."""
    warm_start_beside: bool = True
    """On a machine without a warm start, `slca up` serves the base model at once and trains the warm start beside
    it (the `warmstart` process: `slca sft --publish`); its model arrives as a hot swap — published as the next
    weight version, signed and announced, and promoted for callers — and only then do the feed and the learner start
    (ops/run/supervisor/warm_stage.py). False: the warm start first, and serving only after it."""
    warm_start_swap_timeout_s: float = Field(default=600.0, gt=0)
    """How long the warm start waits for serve — to be ready before its version is promoted, and then to serve that
    version (promoted and candidate) — before it gives up waiting (the feed and the learner start all the same)."""
    warm_start_eval_tasks: int = 0
    """Held-out tasks of the warm start's before/after parseable-call check (0: none). Why none: the two greedy
    checks of 20 tasks took 4:45 before training on one core (`plan.split_threads`) and about 12 minutes together in
    fp32 (docs/cpu-facts.md#warm-start), all of it before the swap; the probe's baseline round evaluates the warm start
    anyway (every held-out item, through the serving engine), once, and caches it by the model's content."""
    warm_model_name: str = "SmolLM2-135M-Instruct-sft"
    """Model directory under `<cache_dir>/models/` that `slca sft` writes; `slca up` serves it when present
    and no model is configured explicitly."""

    feed_url: str | None = None
    """Base URL of the agent API the feed drives. None: http://<serve.host>:<serve.port>."""
    feed_pack: str = "everyday"
    """Task pack the feed draws training tasks from (`sim.tasks.load_tasks(pack, "train")`)."""
    feed_concurrency: int = Field(default=2, ge=1)
    """Agent-run requests in flight at once."""
    feed_group_size: int | None = None
    """Rollouts per request (`n`). None: the workers' group size (so one request makes one group)."""
    feed_max_tokens: int = 192
    """Token budget per model turn."""
    feed_max_turns: int = 3
    """Model turns per episode."""
    feed_temperature: float = 1.0
    """Sampling temperature of training rollouts."""
    feed_top_p: float = 1.0
    """Nucleus sampling bound of training rollouts."""
    feed_retry_initial_s: float = 0.5
    """First back-off after a 503 or a connection error; doubles per retry."""
    feed_retry_max_s: float = 30.0
    """Upper bound of the feed's retry back-off."""
    feed_stop_grace_s: float = Field(default=5.0, ge=0)
    """After a stop, how long the feed's requests in flight may finish (their rollouts recorded) before they are
    abandoned; keep it below `shutdown_grace_s`."""
    feed_max_group_backlog: int = 4
    """The feed waits while the learner has more rollout groups than this waiting (0: never waits). Groups the
    learner cannot reach within `learner.max_staleness` versions are dropped; sampling them only takes CPU
    from the learner on a shared machine."""
    feed_requests: int = 0
    """Requests the feed sends before it exits (status 0: `slca up` does not restart it); 0 = no limit."""
    feed_seed: int = 0
    """Seed of the task order."""
    feed_skip_uniform_p: float = Field(default=0.0, ge=0, lt=1)
    """Selective rollouts (ops/run/feed/selective.py, after GRESO): a training task whose latest group was uniform
    (every member solved, or every one failed: difficulty screening leaves such a group out, so its generation
    trains nothing) is passed over with this probability each time it comes up; its outcome is read from the
    scorer's `stats:rewards` stream. 0: every task every epoch. Off by default until `slca bench rl` and a
    learning comparison have measured it (`--pipeline-set ops.feed_skip_uniform_p=0.8`)."""
    probe_enabled: bool = True
    """Run the probe in `slca feed` (ops/run/feed/probe.py): the evaluation (`ops.experiments.eval.suite`) against the
    served API — a baseline round at the first readiness (v0, every item pinned to it while the feed goes on),
    periodic rounds while training runs, a final round at the stop — never recorded."""
    probe_every_minutes: float = Field(default=20.0, ge=0)
    """A periodic round is due this many minutes after the last round ended, once a new version is served (0: not
    by time). With `probe_budget_share` this is the cadence; 20 gives two periodic rounds in a 60-minute run."""
    probe_every_versions: int = Field(default=0, ge=0)
    """A periodic round is also due once the served version has advanced this many versions since the last round
    (0: not by versions)."""
    probe_budget_share: float = Field(default=0.10, ge=0, le=1)
    """A periodic round runs only if the probe's seconds (baseline and periodic rounds), its own estimate included,
    stay within this share of the run's serving seconds; otherwise it waits (0: no budget). The share is reported
    with every round (`slca status`, `slca bench online`).

    What a round costs (read from the code, timed in bench/online/run5-fresh-clone: 289 items in 557 s, greedy, the
    feed held, 2 avx512_bf16 cores, ≈ 1.9 s an item; a task is an agent run of up to 3 turns, a BFCL item one
    turn): the baseline and the final round ask every item — test 117 + novel 132 + train_probe 64 + BFCL 5 × 8 =
    353, ≈ 680 s; a periodic round asks the training-task probe, 64 items ≈ 125 s. A 60-minute run with the
    baseline cached: two periodic rounds ≈ 250 s ≈ 7% of its serving time; the first run on a machine spends ≈ 680
    s (19%, more beside training: it no longer holds the feed) on the baseline, so the budget holds its periodic
    rounds back. The final round runs after training stopped and is not counted."""
    probe_item_seconds: float = Field(default=2.0, gt=0)
    """Seconds an item is estimated to take until a round has been timed on this machine (the budget's estimate;
    then the last round's own rate)."""
    probe_final_timeout_s: float = Field(default=900.0, ge=0)
    """At a stop, the feed runs a final round — every item, on the last served version — for at most this long
    (0: none); `slca up` then stops the feed and the learner first and waits this long (plus the feed's grace)
    before it stops the rest, so Ctrl-C can take that long. `slca bench online` judges the last served version
    itself when no final round did (pinned, from its published weights)."""
    probe_holds_feed: bool = True
    """The feed sends no new requests while a periodic round runs (ops/run/feed/probe.py `ProbePlan.holds_feed`): a
    round then takes minutes, not the 40 it took beside training, and is answered by a few versions, not 29. The
    baseline never holds it: its items are pinned to its version, and holding the feed for its ≈ 680 s on a fresh
    machine kept the learner's first step that much later."""
    probe_baseline_hold_s: float = Field(default=600.0, ge=0)
    """On a serve with one engine per process (vLLM), where the baseline holds the feed, it holds it at most this
    long (0: no bound): the baseline's items go in chunks, the training-task probe's first, and at the bound the items
    answered so far are the baseline (later rounds pair with it on those). Unbounded, the baseline of ≈ 350 items held
    the feed 2,419 s on a loaded avx2-only 2-core machine, and the learner's first step waited that long
    (bench/soak/learning-30-trim)."""
    probe_mode: str = "greedy"
    """'greedy' (temperature 0: what the policy does) or 'sampled' (temperature 1, a fixed seed per item)."""
    probe_splits: list[str] = Field(default_factory=lambda: ["test", "novel", "train_probe"])
    """Splits of `feed_pack` the baseline and final rounds ask: held-out ones (every task; the feed trains on 'train'
    only) and `train_probe`, the training-task probe (`probe_train_size` train tasks, fixed: tasks the learner trains
    on)."""
    probe_train_size: int = Field(default=64, ge=1)
    """Tasks of the training-task probe (`sim.tasks.probe.training_probe`: stratified over intents, its own seed)."""
    probe_round_suites: list[str] = Field(default_factory=lambda: ["train_probe"])
    """Suites of those items a periodic round asks again ('bfcl' for every BFCL item; []: every item)."""
    probe_baseline_version: int = Field(default=0, ge=0)
    """The served version whose round is the warm start's own evaluation, the one cached by model content: 0, the
    model serve starts with; `slca up` sets it for the feed when the warm start arrived as a version of this run."""
    probe_cache_baseline: bool = True
    """Keep the warm start's baseline evaluation under `<cache_dir>/probe-baselines/` and read it back in a later
    run on the same model, items and scorer (`ops.run.feed.baseline_cache`)."""
    probe_bfcl_per_category: int = Field(default=8, ge=0)
    """BFCL items per category a round asks: a seeded random sample, the same every round (0: no BFCL)."""
    probe_concurrency: int = Field(default=8, ge=1)
    """Probe requests in flight at once: the engine batches them."""
