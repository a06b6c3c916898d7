"""Contracts: round-trips through JSON and msgpack, and rejection of broken objects naming the field."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slca.contracts import (
    ContractError,
    Reward,
    RolloutGroup,
    SegmentKind,
    Trajectory,
    WeightManifest,
    dump_json,
    dump_msgpack,
    load_json,
    load_msgpack,
)
from tests.support.trajectories import trajectory

KINDS = list(SegmentKind)


@st.composite
def trajectories(draw, task_id: str | None = None):
    """Random valid trajectories: a sequence of non-empty spans of random kinds."""
    spec = draw(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(1, 6)), min_size=1, max_size=8))
    tokens, logprobs = [], []
    for kind, length in spec:
        tokens += draw(st.lists(st.integers(0, 49151), min_size=length, max_size=length))
        lp = st.floats(-30.0, 0.0, allow_nan=False) if kind.generated else st.none()
        logprobs += draw(st.lists(lp, min_size=length, max_size=length))
    return trajectory(
        spec,
        tokens=tokens,
        logprobs=logprobs,
        task_id=task_id or draw(st.text(min_size=1, max_size=8)),
        policy_version=draw(st.integers(0, 100)),
        meta={"engine": "hf"},
    )


@given(trajectories())
@settings(max_examples=60, deadline=None)
def test_trajectory_round_trips(traj):
    assert load_json(Trajectory, dump_json(traj)) == traj
    assert load_msgpack(Trajectory, dump_msgpack(traj)) == traj


@given(st.lists(trajectories(task_id="t1"), min_size=1, max_size=4), st.booleans())
@settings(max_examples=30, deadline=None)
def test_group_round_trips(members, partial):
    rewards = [Reward(trajectory_id=t.id, exec=0.5, pref=0.25, components={"name": 1.0}) for t in members]
    versions = [t.policy_version for t in members]
    group = RolloutGroup(
        task_id="t1",
        policy_version_min=min(versions),
        policy_version_max=max(versions),
        trajectories=members,
        rewards=rewards,
        partial=partial,
    )
    assert load_msgpack(RolloutGroup, dump_msgpack(group)) == group
    assert load_json(RolloutGroup, dump_json(group)) == group


def _valid() -> dict:
    return {
        "task_id": "t",
        "policy_version": 0,
        "tokens": [1, 2, 3, 4],
        "logprobs": [None, None, -0.5, -0.1],
        "segments": [
            {"start": 0, "end": 2, "kind": "user"},
            {"start": 2, "end": 4, "kind": "summary"},
        ],
    }


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["segments"].pop(), "segments"),  # a token left uncovered
        (lambda d: d["segments"].append({"start": 1, "end": 3, "kind": "summary"}), "segments"),  # overlap
        (lambda d: d["logprobs"].__setitem__(3, None), "logprobs"),  # generated token without logprob
        (lambda d: d["logprobs"].__setitem__(0, -1.0), "logprobs"),  # logprob on a prompt token
        (lambda d: d["logprobs"].pop(), "logprobs"),  # length mismatch
        (lambda d: d["segments"][1].__setitem__("kind", "banter"), "segments.1.kind"),  # unknown kind
        (lambda d: d.__setitem__("policy_version", -1), "policy_version"),
        (lambda d: d.__setitem__("task_id", ""), "task_id"),
        (lambda d: d.__setitem__("surprise", 1), "surprise"),  # unknown field
        (lambda d: d.__setitem__("schema_version", 99), "schema_version"),
    ],
)
def test_broken_trajectory_rejected_naming_field(mutate, field):
    import json

    data = _valid()
    mutate(data)
    with pytest.raises(ContractError) as err:
        load_json(Trajectory, json.dumps(data))
    assert field in str(err.value)


@given(trajectories(), st.data())
@settings(max_examples=40, deadline=None)
def test_any_dropped_or_flipped_logprob_is_rejected(traj, data):
    """Property: removing a generated token's logprob, or adding one on a prompt token, is always caught."""
    raw = traj.model_dump(mode="json")
    i = data.draw(st.integers(0, len(raw["tokens"]) - 1))
    raw["logprobs"][i] = -1.0 if raw["logprobs"][i] is None else None
    with pytest.raises(ContractError, match="logprobs"):
        load_msgpack(Trajectory, __import__("msgpack").packb(raw))


def test_group_members_must_share_task_id():
    a = Trajectory.model_validate({**_valid(), "task_id": "a"})
    b = Trajectory.model_validate({**_valid(), "task_id": "b"})
    rewards = [Reward(trajectory_id=t.id, exec=0, pref=0) for t in (a, b)]
    raw = RolloutGroup.model_construct(
        task_id="a", policy_version_min=0, policy_version_max=0, trajectories=[a, b], rewards=rewards
    ).model_dump(mode="json")
    with pytest.raises(ContractError, match=r"trajectories\.1\.task_id"):
        load_msgpack(RolloutGroup, __import__("msgpack").packb(raw))


def test_reward_rejects_nan():
    with pytest.raises(ContractError, match="exec"):
        load_json(Reward, '{"trajectory_id": "x", "exec": NaN, "pref": 0}')


def test_not_json_is_a_contract_error():
    with pytest.raises(ContractError, match="not JSON"):
        load_json(Trajectory, b"{nope")
    with pytest.raises(ContractError, match="not msgpack"):
        load_msgpack(Trajectory, b"\xc1")


def test_weight_manifest_verify(tmp_path):
    from slca.contracts.weights import sha256_file

    f = tmp_path / "model.safetensors"
    f.write_bytes(b"weights")
    m = WeightManifest(version=3, path=str(tmp_path), sha256={f.name: sha256_file(f)}, base_model="tiny")
    assert m.verify() == []
    assert load_json(WeightManifest, dump_json(m)) == m
    f.write_bytes(b"tampered")
    assert m.verify() == [f.name]
    with pytest.raises(ContractError, match="format"):
        load_json(WeightManifest, dump_json(m).replace('"safetensors"', '"pickle"'))
