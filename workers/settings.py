"""Settings of the scoring workers, stream consumer and group assembler."""

from typing import Literal

from pydantic import Field, model_validator

from slca.config import SectionSettings
from slca.contracts.queues import DEAD_MAXLEN
from slca.contracts.stats import STATS_MAXLEN


class WorkerSettings(SectionSettings):
    group_size: int = Field(default=8, ge=1)
    """G: rollouts per task in one group. 8: with 4, most groups of the warm-started 135M model had one
    outlier or none, so each step's gradient was mostly noise."""
    concurrency: int = Field(default=1, ge=1)
    """Celery worker processes."""

    # --- HierR scoring (docs/design.md#hierr) ---
    scorer_version: str = "hierr-4"
    """Part of the idempotence key of a stored reward: bump it when scoring changes so old rewards are not reused."""
    tokenizer: str | None = None
    """Tokenizer of the sample trajectories `slca bench queue` produces: None = the policy model's
    (`common.model`), or 'embedded', 'tiny' (cached models) or a model directory. Scoring decodes nothing: it
    reads the calls the server parsed (`Trajectory.tool_calls`)."""
    exec_mode: Literal["auto", "gold", "outcome"] = "auto"
    """'gold': compare with gold calls; 'outcome': `exec_outcome` (valid, executed, completed); 'auto': outcome
    only for tasks that need a tool but have no gold calls."""
    w_format: float = 0.10
    """Weight of the format component in r_exec."""
    w_name: float = 0.25
    """Weight of the tool-name multiset F1 in r_exec."""
    w_key: float = 0.15
    """Weight of the argument-key Jaccard in r_exec."""
    w_value: float = 0.20
    """Weight of the loose argument-value match in r_exec."""
    w_parallel: float = 0.30
    """Weight of the first-step parallel-count match in r_exec."""
    omission_guard: bool = True
    """Apply the omission guard (the scorer is its one home; the learner reads the shaped r_pref)."""
    no_call_penalty: float = -0.5
    """Omission guard: r_pref when the task needs a tool and no parseable call exists."""
    rltr_repeat_penalty: float = 0.2
    """RLTR planner reward (component `rltr_plan`): μ per repeated call."""
    rltr_fail_penalty: float = 0.1
    """RLTR planner reward: λ per failed call (its execution returned an error)."""
    rltr_format_penalty: float = -1.0
    """RLTR planner reward when any call block is invalid format (not a JSON object naming an offered tool
    with object arguments)."""
    judge: Literal["rule", "openai"] = "rule"
    """Preference judge: the deterministic rule scorer (offline default) or an OpenAI-compatible endpoint."""
    judge_url: str | None = None
    """Base URL of the OpenAI-compatible judge (e.g. http://127.0.0.1:8000/v1)."""
    judge_model: str = "judge"
    """Model name sent to the judge endpoint."""
    judge_api_key_env: str = "SLCA_JUDGE_API_KEY"
    """Environment variable holding the judge's API key (never put the key in a config file)."""
    judge_timeout_s: float = Field(default=30.0, gt=0)
    """Timeout of one judge request."""
    judge_retries: int = Field(default=2, ge=0)
    """In-process retries of a transient judge failure before the error reaches Celery's retry."""
    rule_min_chars: int = Field(default=8, ge=0)
    """Rule judge: shortest sensible final reply (characters)."""
    rule_max_chars: int = Field(default=1200, ge=1)
    """Rule judge: longest sensible final reply (characters)."""

    # --- Celery ---
    score_queue: str = "slca.score"
    """Celery queue of the scoring tasks."""
    visibility_timeout_s: float = Field(default=300.0, gt=0)
    """Broker visibility timeout: an unacknowledged task is redelivered after this; keep it longer than the
    slowest scorer (an LLM judge with retries). It is also how long the task of a worker host that vanished
    mid-task (SIGKILL, power, network) waits before another worker takes it: with the rule judge (milliseconds a
    batch) lower it, and `group_timeout_s` with it, for a faster recovery."""
    restore_interval_s: int = Field(default=10, ge=1)
    """How often a worker scans for unacknowledged tasks past the visibility timeout (kombu's restore sweep;
    kombu's own default is only every ~100 s)."""
    restore_lock_s: int = Field(default=10, ge=1)
    """Expiry of the lock a worker holds while it scans for those tasks (kombu's `unacked_mutex`). A worker host
    that vanishes while it holds the lock stops every other worker's scan until the lock expires: kombu's default
    of 300 s on top of the visibility timeout would outlast `group_timeout_s`. A scan takes milliseconds; if one
    outlives the lock, two workers may restore the same task, which idempotent scoring absorbs."""
    task_max_retries: int = Field(default=5, ge=0)
    """Celery retries of a transient failure (judge unreachable, Redis blip) before the entry is dead-lettered."""
    retry_backoff_s: float = Field(default=1.0, gt=0)
    """First retry delay; doubles per retry, with full jitter."""
    retry_backoff_max_s: float = Field(default=60.0, gt=0)
    """Cap of the retry delay."""

    # --- stream consumer and group assembly ---
    consumer_group: str = "slca-assembler"
    """Consumer group on the trajectories stream."""
    consumer_name: str | None = None
    """This consumer's name in the group; None: host-pid."""
    read_batch: int = Field(default=256, ge=1)
    """Entries per XREADGROUP."""
    task_batch: int = Field(default=16, ge=1)
    """Trajectories per scoring task: Celery's per-message cost (several Redis round trips) is paid once per
    batch. A killed worker's batch is redelivered whole; the duplicates are absorbed by idempotence."""
    read_block_ms: int = Field(default=200, ge=1)
    """XREADGROUP blocking time."""
    claim_idle_ms: int = Field(default=30000, ge=1)
    """XAUTOCLAIM entries pending longer than this (a dead consumer's work)."""
    max_deliveries: int = Field(default=5, ge=1)
    """After this many failed deliveries an entry goes to the dead-letter stream."""
    version_window: int = Field(default=1, ge=1)
    """Members of a group share `policy_version // version_window`."""
    group_timeout_s: float = Field(default=330.0, gt=0)
    """After this, a group with ≥ 2 scored members is emitted as partial; a lone member is dead-lettered.
    Must exceed the time a vanished worker's task takes to come back — `visibility_timeout_s` +
    `restore_interval_s` + `restore_lock_s`, and `claim_idle_ms` for entries a dead assembler held (checked at
    load) — else a member whose worker host died mid-task is redelivered only after its group went out partial
    (or its one scored sibling was dead-lettered alone), and then counts as late: one group becomes dead letters.
    (It was 60 s under a 300 s visibility timeout, which did exactly that.) Only groups missing a member wait this
    long."""
    late_window_s: float = Field(default=3600.0, gt=0)
    """How long after a partial emission late members of that group are recognised (and dead-lettered as late)."""
    claim_stale_s: float = Field(default=30.0, gt=0)
    """A completed group not yet written (its writer died) is written by the assembler after this."""
    max_groups_len: int = Field(default=10000, ge=1)
    """Bound of `slca:groups`' backlog (entries its consumer groups have not acknowledged; its length when it
    has no consumer group): at this bound groups wait as claims (nothing lost) and intake pauses."""
    trim_consumed_groups: bool = True
    """The assembler trims `slca:groups` entries that every live consumer group has acknowledged (the stream would
    otherwise keep every group ever written)."""
    trim_stale_group_s: float = Field(default=3600.0, gt=0)
    """A consumer group none of whose consumers has read for this long (or that has none) is a leftover: trimming
    and back-pressure (`max_groups_len`) pass it over while another group is live. A learner down longer than this,
    beside another live group, loses the entries that group acknowledged meanwhile, and no longer holds intake."""
    max_inflight: int = Field(default=20000, ge=1)
    """Intake pauses while the Celery scoring queue holds this many tasks (each up to `task_batch` entries)."""
    sweep_interval_s: float = Field(default=1.0, gt=0)
    """How often the assembler looks for timed-out groups and stale claims."""
    orphan_check_s: float = Field(default=10.0, gt=0)
    """How often the assembler looks for stream entries whose scoring task the broker lost (a worker's connection
    dropped between taking a task and recording it as unacknowledged: `workers/orphans.py`); one seen on two
    checks is enqueued again, so it is back within about twice this — well inside `group_timeout_s`."""
    key_ttl_s: int = Field(default=7 * 86400, ge=60)
    """TTL of the idempotence keys (stored rewards, group membership, dead-letter marks)."""
    stats_maxlen: int = Field(default=STATS_MAXLEN, ge=1)
    """MAXLEN (approximate) of the dashboard rewards stats stream (`slca.contracts.stats.STATS_MAXLEN` by default:
    the readers fetch at most that many rows)."""
    dead_maxlen: int = Field(default=DEAD_MAXLEN, ge=1)
    """MAXLEN (approximate: Redis trims whole nodes, so up to ~100 more) of the dead-letter stream `slca:dead`
    (`slca.contracts.queues.DEAD_MAXLEN` by default, the learner's bound too); the oldest dead letters go first.
    Each dead-letter mark (idempotence) still lives `key_ttl_s`."""
    metrics_port: int = Field(default=0, ge=0)
    """Prometheus port of `slca worker` / `slca assembler` (0 = off)."""

    @model_validator(mode="after")
    def _judge_reachable(self) -> "WorkerSettings":
        if self.judge == "openai" and not self.judge_url:
            raise ValueError("judge = 'openai' needs judge_url (the endpoint's base URL, e.g. http://host:8000/v1)")
        return self

    @model_validator(mode="after")
    def _group_outlasts_redelivery(self) -> "WorkerSettings":
        """A group's timeout must outlast the redelivery of a member whose worker (or assembler) vanished mid-task:
        exactly-once group assembly across a lost worker host depends on it (`group_timeout_s`)."""
        task_back = self.visibility_timeout_s + self.restore_interval_s + self.restore_lock_s
        entry_back = self.claim_idle_ms / 1000
        if self.group_timeout_s <= max(task_back, entry_back):
            raise ValueError(
                f"group_timeout_s ({self.group_timeout_s:g}) must exceed visibility_timeout_s + restore_interval_s "
                f"+ restore_lock_s ({task_back:g}) and claim_idle_ms / 1000 ({entry_back:g}): a member whose worker "
                "host vanished mid-task comes back only then, and its group would already have gone out partial"
            )
        if self.group_timeout_s <= 2 * self.orphan_check_s:
            raise ValueError(
                f"group_timeout_s ({self.group_timeout_s:g}) must exceed 2 × orphan_check_s ({self.orphan_check_s:g}): "
                "an entry whose task was lost is enqueued again only after two checks"
            )
        return self

    def with_tokenizer_of(self, common) -> "WorkerSettings":
        """These settings with `tokenizer` resolved to a directory, using the common model and cache dir."""
        from pathlib import Path

        from slca.models.paths import resolve_model

        name = self.tokenizer or common.model
        return self.model_copy(update={"tokenizer": str(resolve_model(name, Path(common.cache_dir)))})
