"""The stats streams' records (`slca.contracts.stats`): round-trips through the stream encoding, unknown fields
ignored, entries written before the contract read back, malformed ones refused naming the field."""

from __future__ import annotations

import math

import pytest

from slca.contracts import ContractError
from slca.contracts.stats import (
    PROBE_FIELD,
    SCHEMA_FIELD,
    STATS_SCHEMA,
    LearnerStepStats,
    RewardStats,
    probe_fields,
    probe_from_fields,
)

REWARD = RewardStats(exec=0.75, pref=0.5, tool_turns=2, policy_version=7, task_id="task-a", ts=1700000000.123456)
STEP = LearnerStepStats(
    step=12, version=3, loss=-0.25, kl=0.001, clip_frac=0.0, groups=4, ts=1700000001.5, zero_var={"exec": 0.25}
)


def as_redis(fields: dict[str, str]) -> dict[bytes, bytes]:
    """What redis-py returns for an entry (decode_responses off)."""
    return {k.encode(): v.encode() for k, v in fields.items()}


@pytest.mark.parametrize("record", [REWARD, STEP, RewardStats(exec=0.0, policy_version=0, ts=0.0)])
def test_round_trip_through_the_stream_fields(record):
    fields = record.to_fields()
    assert fields[SCHEMA_FIELD] == str(STATS_SCHEMA) and all(isinstance(v, str) for v in fields.values())
    assert type(record).from_fields(fields) == record
    assert type(record).from_fields(as_redis(fields)) == record


def test_the_wire_keeps_the_field_names_the_readers_knew():
    assert set(REWARD.to_fields()) == {SCHEMA_FIELD, "exec", "pref", "tool_turns", "policy_version", "task_id", "ts"}
    assert set(STEP.to_fields()) == {
        *(SCHEMA_FIELD, "step", "version", "loss", "kl", "clip_frac", "groups", "ts"),
        "zero_var/exec",
    }
    assert float(REWARD.to_fields()["ts"]) == REWARD.ts  # repr: no precision lost


def test_entries_written_before_the_contract_read_back():
    """No `schema` field, numbers as the writers' str()/repr() wrote them, fields added later missing."""
    old = {b"exec": b"0.5", b"pref": b"0.25", b"tool_turns": b"1", b"policy_version": b"4", b"ts": b"10.0"}
    assert RewardStats.from_fields(old) == RewardStats(exec=0.5, pref=0.25, tool_turns=1, policy_version=4, ts=10.0)
    step = LearnerStepStats.from_fields({"step": "3", "version": "2", "loss": "nan", "ts": "5.0"})
    assert step.step == 3 and math.isnan(step.loss) and step.groups is None and step.zero_var == {}


def test_unknown_extra_fields_are_ignored():
    fields = {**STEP.to_fields(), "grad_norm": "1.5", "note": "a newer writer's field"}
    assert LearnerStepStats.from_fields(fields) == STEP
    assert RewardStats.from_fields({**REWARD.to_fields(), "judge": "x"}) == REWARD


@pytest.mark.parametrize(
    "cls, fields, named",
    [
        (RewardStats, {**REWARD.to_fields(), "exec": "high"}, "exec"),
        (RewardStats, {**REWARD.to_fields(), "policy_version": "7.5"}, "policy_version"),
        (RewardStats, {k: v for k, v in REWARD.to_fields().items() if k != "ts"}, "ts"),
        (LearnerStepStats, {**STEP.to_fields(), "step": "twelve"}, "step"),
        (LearnerStepStats, {**STEP.to_fields(), "zero_var/pref": "bad"}, "zero_var.pref"),
        (LearnerStepStats, {**STEP.to_fields(), SCHEMA_FIELD: "99"}, SCHEMA_FIELD),
    ],
)
def test_a_malformed_entry_is_refused_naming_the_field(cls, fields, named):
    with pytest.raises(ContractError, match=rf"invalid {cls.__name__}: {named}\b"):
        cls.from_fields(fields)


def test_records_are_checked_when_written_too():
    with pytest.raises(ValueError):
        LearnerStepStats(step="x", version=1, ts=0.0)


def test_probe_round_entries():
    data = {"schema": 2, "version": 3, "suites": {}}
    fields = probe_fields(data)
    assert set(fields) == {PROBE_FIELD} and probe_from_fields(as_redis(fields)) == data
    assert probe_from_fields({**fields, "extra": "x"}) == data
    for bad, named in [
        ({}, "no 'json' field"),
        ({b"json": b"{broken"}, "not JSON"),
        ({"json": "[1]"}, "not an object"),
    ]:
        with pytest.raises(ContractError, match=named):
            probe_from_fields(bad)
