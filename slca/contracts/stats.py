"""Typed records of the capped stats streams (`<prefix>:stats:*`, docs/design.md#metrics) and their limits.

Each stream has one writer and one reader, and both go through the record type here:

- `RewardStats` on `stats:rewards`: one row per scored trajectory, written by the workers' add script
  (`workers.groups`), read by `ops.observe.redis_view` (and, with `ops.feed_skip_uniform_p`, by the feed's
  `ops.run.feed.selective`: each training task's latest outcomes);
- `LearnerStepStats` on `stats:learner`: one row per learner step, written by `learner.loop.record_step`, read by
  `ops.observe.redis_view`;
- the held-out probe's rounds on `stats:probe` (`PROBE_FIELD`, the JSON of `ops.observe.probe_rounds.ProbeRound`),
  written by `ops.run.feed.probe`, read by `ops.observe.redis_view`.

A stream entry is flat: one plain string field per value (Redis stream fields are strings), plus `schema`
(`STATS_SCHEMA`). `to_fields()` writes one; `from_fields()` reads one back, ignoring fields it does not know
(a newer writer may add some) and raising `ContractError` naming the field for a value of the wrong type, a
missing required field or another schema. Entries written before the field `schema` existed have the same layout
and read as schema 1.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from slca.contracts.queues import STATS_LEARNER, STATS_REWARDS
from slca.contracts.wire import ContractError, _describe

STATS_SCHEMA = 1
"""Version of the stats records' field layout (`schema` on the wire); readers refuse another one."""
SCHEMA_FIELD = "schema"

STATS_MAXLEN = 2000
"""MAXLEN (approximate: Redis trims whole nodes) of `stats:rewards` and `stats:learner`: the writers cap the
streams at about this many rows."""
STATS_READ_MAX = STATS_MAXLEN
"""Most rows of `stats:rewards` / `stats:learner` a reader fetches in one call (the dashboard's `?limit=` cap, the
per-version reward curve): all the writers keep, no more."""
STATS_READ_DEFAULT = 500
"""Rows of `stats:rewards` / `stats:learner` a reader fetches when not told (the dashboard's default `?limit=`)."""
PROBE_MAXLEN = 10_000
"""MAXLEN (approximate) of `stats:probe`: the probe keeps about this many rounds."""
PROBE_READ_MAX = 1000
"""Most probe rounds a reader fetches in one call (`slca status`, `slca bench online`)."""
PROBE_READ_DEFAULT = STATS_READ_DEFAULT
"""Probe rounds the dashboard fetches with its stats rows."""

ZERO_VAR_PREFIX = "zero_var/"
"""`LearnerStepStats.zero_var` travels as one field `zero_var/<channel>` per channel of the estimator."""
PROBE_FIELD = "json"
"""A probe round travels as its JSON under this one field."""


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _encode(v: Any) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return repr(v)
    return str(v)


def decode_fields(fields: dict) -> dict[str, str]:
    """A stream entry's fields (bytes or str, as redis-py returns them) as str → str."""
    return {_text(k): _text(v) for k, v in fields.items()}


def _check_schema(cls: type, fields: dict[str, str]) -> None:
    raw = fields.get(SCHEMA_FIELD, str(STATS_SCHEMA))
    if raw != str(STATS_SCHEMA):
        raise ContractError(
            f"invalid {cls.__name__}: {SCHEMA_FIELD}: got {raw!r}, this reader understands {STATS_SCHEMA}"
        )


class StatsRecord(BaseModel):
    """Base of the stats stream records: unknown fields ignored, values checked (a number field must parse as one)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    STREAM: ClassVar[str]
    """The stream's suffix after the prefix (`Streams.stats(STREAM)`)."""

    def to_fields(self) -> dict[str, str]:
        """The stream entry: one string per set value (None left out), plus `schema`."""
        out = {SCHEMA_FIELD: str(STATS_SCHEMA)}
        for name, value in self.model_dump().items():
            if value is not None:
                out[name] = _encode(value)
        return out

    @classmethod
    def from_fields(cls, fields: dict):
        """The record of a stream entry; `ContractError` naming the field for a malformed one."""
        decoded = decode_fields(fields)
        _check_schema(cls, decoded)
        return cls._validate(cls._gather(decoded))

    @classmethod
    def _gather(cls, fields: dict[str, str]) -> dict[str, Any]:
        return {k: v for k, v in fields.items() if k in cls.model_fields}

    @classmethod
    def _validate(cls, data: dict[str, Any]):
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ContractError(_describe(cls, exc)) from None

    def to_row(self) -> dict[str, Any]:
        """The record as the readers' views show it (`ops.observe.redis_view.Snapshot`)."""
        return self.model_dump()


class RewardStats(StatsRecord):
    """One scored trajectory on `stats:rewards` (written once, when its reward is first stored)."""

    STREAM: ClassVar[str] = STATS_REWARDS

    exec: float
    pref: float | None = None
    tool_turns: int | None = None
    """Model turns of the episode that wrote a tool call (the reward's `tool_turns` component)."""
    success: float | None = None
    """The reward's `success` component (0/1, the headline of every evaluation); None in rows written before it."""
    policy_version: int
    """The version that sampled the trajectory."""
    task_id: str | None = None
    ts: float
    """Unix time it was scored."""

    def to_row(self) -> dict[str, Any]:
        return self.model_dump(exclude={"task_id"})


class LearnerStepStats(StatsRecord):
    """One learner step on `stats:learner`."""

    STREAM: ClassVar[str] = STATS_LEARNER

    step: int
    version: int
    """The policy version after the step (a publication in the step counts)."""
    loss: float | None = None
    kl: float | None = None
    clip_frac: float | None = None
    groups: int | None = None
    """Rollout groups the step trained on."""
    ts: float
    zero_var: dict[str, float] = {}
    """Estimator channel → share of the step's groups with zero reward variance there (they teach it nothing);
    on the wire one field `zero_var/<channel>` each."""

    def to_fields(self) -> dict[str, str]:
        out = super().to_fields()
        out.pop("zero_var", None)
        out.update({f"{ZERO_VAR_PREFIX}{k}": _encode(v) for k, v in self.zero_var.items()})
        return out

    @classmethod
    def _gather(cls, fields: dict[str, str]) -> dict[str, Any]:
        data = super()._gather({k: v for k, v in fields.items() if k != "zero_var"})
        data["zero_var"] = {k[len(ZERO_VAR_PREFIX) :]: v for k, v in fields.items() if k.startswith(ZERO_VAR_PREFIX)}
        return data


def probe_fields(round_json: dict[str, Any]) -> dict[str, str]:
    """The `stats:probe` entry of a round (`ops.observe.probe_rounds.ProbeRound.to_json()`)."""
    return {PROBE_FIELD: json.dumps(round_json)}


def probe_from_fields(fields: dict) -> dict[str, Any]:
    """The round JSON of a `stats:probe` entry (typed by `ProbeRound.from_json`, which also drops older schemas);
    `ContractError` for an entry without the field or whose field is not a JSON object."""
    raw = fields.get(PROBE_FIELD.encode(), fields.get(PROBE_FIELD))
    if raw is None:
        raise ContractError(f"invalid probe round: entry has no '{PROBE_FIELD}' field")
    try:
        data = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise ContractError(f"invalid probe round: {PROBE_FIELD}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ContractError(f"invalid probe round: {PROBE_FIELD}: a JSON {type(data).__name__}, not an object")
    return data
