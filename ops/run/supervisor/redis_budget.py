"""The memory budget of the Redis `slca up` owns (`ops.redis_maxmemory = "auto"`), computed from the settings.

That Redis evicts nothing (`maxmemory-policy noeviction`): the pipeline's exactly-once markers carry TTLs, and an
evicting policy would take them. Its `maxmemory` is then a ceiling the configured bounds should keep it under — the
sum of what each kind of data may hold at its bound:

| part | bound | bytes |
|---|---|---|
| trajectories | `serve.max_stream_bytes` (serve measures the stream) | that |
| buckets | a member waiting for its group holds a copy; its entry is still in the stream | `serve.max_stream_bytes` |
| groups | `workers.max_groups_len` groups of `workers.group_size` members | × `trajectory_bytes` each |
| dead letters | `workers.dead_maxlen` entries, each with its trajectory | × `trajectory_bytes` |
| stats | `STATS_MAXLEN` rows of `stats:rewards` and `stats:learner`, `PROBE_MAXLEN` probe rounds | small rows |
| scoring queue | `workers.max_inflight` Celery tasks (entry ids, not trajectories) | × `TASK_BYTES` |
| sim cache | `sim.cache_max_bytes` (the cache bounds itself; off with `sim.cache = false`) | that |
| markers | `workers.key_ttl_s` × `ops.redis_budget_trajectories_per_s` trajectories | × `MARKER_BYTES_PER_TRAJECTORY` |
| base | Redis itself, replica statuses, the weights announcement, AOF rewrite buffers | `BASE_BYTES` |

`trajectory_bytes` = `serve.max_model_len` × `TRAJECTORY_BYTES_PER_TOKEN` + `TRAJECTORY_BASE_BYTES` (a msgpack
trajectory of 2,048 tokens measured 24 kB: 3-byte token ids, 9-byte log-probabilities, the messages' text; the
constants leave room for tool schemas and Redis' own overhead). With the defaults the groups stream dominates (10,000
groups of 8, about 3 GB): a long learner outage fills it before anything else, and it is the bound to lower
(`workers.max_groups_len`) on a small machine. The budget only caps what Redis may take; Redis allocates what it
holds.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

from ops.settings import OpsSettings
from serve.settings import ServeSettings
from sim.settings import SimSettings
from slca.config import Config
from slca.contracts.stats import PROBE_MAXLEN, STATS_MAXLEN
from workers.settings import WorkerSettings

log = logging.getLogger("slca.up")

TRAJECTORY_BYTES_PER_TOKEN = 16
"""Bytes a recorded trajectory takes per token of its context, in Redis (measured ~12 in msgpack, plus margin)."""
TRAJECTORY_BASE_BYTES = 6 * 1024
"""Bytes a trajectory takes whatever its length: tool schemas, ids, metadata, its reward in a group."""
MARKER_BYTES_PER_TRAJECTORY = 1536
"""Exactly-once marks one trajectory leaves for `workers.key_ttl_s`: its stored reward (JSON), membership and
stream-entry marks, with Redis' per-key overhead."""
TASK_BYTES = 2048
"""One Celery scoring task in the broker's queue (its message, `workers.task_batch` entry ids)."""
STATS_ROW_BYTES = 512
PROBE_ROW_BYTES = 8192
BASE_BYTES = 64 << 20
"""Redis' own memory and small keys (replica statuses, `slca:weights:latest`), and room for AOF rewrite buffers."""

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}


@dataclass(frozen=True)
class RedisBudget:
    parts: dict[str, int]
    """Part of the budget (see the module's table) → bytes."""

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        """One line: the total and its parts, largest first."""
        parts = sorted(self.parts.items(), key=lambda kv: -kv[1])
        return f"{mib(self.total)} = " + " + ".join(f"{name} {mib(n)}" for name, n in parts)


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def trajectory_bytes(serve: ServeSettings) -> int:
    """Bytes one recorded trajectory may take in Redis, at most about (its context is at most `max_model_len`)."""
    return serve.max_model_len * TRAJECTORY_BYTES_PER_TOKEN + TRAJECTORY_BASE_BYTES


def redis_budget(config: Config) -> RedisBudget:
    """What the configured bounds let the owned Redis hold, part by part (the module's table)."""
    serve, workers, sim = config.get(ServeSettings), config.get(WorkerSettings), config.get(SimSettings)
    ops = config.get(OpsSettings)
    one = trajectory_bytes(serve)
    return RedisBudget(
        {
            "trajectories": serve.max_stream_bytes,
            "buckets": serve.max_stream_bytes,
            "groups": workers.max_groups_len * workers.group_size * one,
            "dead letters": workers.dead_maxlen * one,
            "stats": 2 * STATS_MAXLEN * STATS_ROW_BYTES + PROBE_MAXLEN * PROBE_ROW_BYTES,
            "scoring queue": workers.max_inflight * TASK_BYTES,
            "sim cache": sim.cache_max_bytes if sim.cache else 0,
            "markers": int(workers.key_ttl_s * ops.redis_budget_trajectories_per_s * MARKER_BYTES_PER_TRAJECTORY),
            "base": BASE_BYTES,
        }
    )


def redis_bytes(size: str) -> int:
    """A size in Redis' units ("512mb", "2gb", "1000000") in bytes; ValueError for anything else."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", size.lower())
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"{size!r} is not a Redis memory size (e.g. 512mb, 2gb)")
    return int(match.group(1)) * _UNITS[match.group(2)]


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def owned_maxmemory(setting: str | None, config: Config) -> str | None:
    """`maxmemory` of the owned Redis from `ops.redis_maxmemory`: "auto" → the budget in bytes; a size → itself
    (a warning when it is below the budget); None → None. Logs the budget, and a warning when it exceeds half of
    this machine's memory (the bounds then allow more than the machine should give Redis)."""
    if setting is None:
        return None
    budget = redis_budget(config)
    log.info("redis memory budget: %s", budget.describe())
    memory = physical_memory()
    if memory and budget.total > memory // 2:
        log.warning(
            "the configured bounds let Redis hold %s, over half of this machine's %s; lower the largest (%s)",
            mib(budget.total),
            mib(memory),
            max(budget.parts, key=budget.parts.get),
        )
    if setting == "auto":
        return str(budget.total)
    if redis_bytes(setting) < budget.total:
        log.warning(
            "ops.redis_maxmemory %s is below the configured bounds' %s: Redis may answer OOM to writes (loudly: "
            "producers back off) before the bounds hold them back",
            setting,
            mib(budget.total),
        )
    return setting
