"""Kill the learner process mid-run and restart it: it resumes from its checkpoint, applies no group twice,
and the published version keeps increasing."""

from __future__ import annotations

import json

import pytest

from slca.contracts import encode_entry
from tests.learner.two_tools import TwoToolTask
from tests.support.learner import wait_for_version

N_GROUPS = 8


def _checkpoint_state(tmp_path) -> dict:
    root = tmp_path / "learner" / "checkpoints"
    return json.loads((root / (root / "LATEST").read_text().strip() / "state.json").read_text())


@pytest.mark.slow  # `slca learn` started twice (torch and the model loaded each time), N_GROUPS real steps
def test_kill_and_restart_resumes_without_reapplying(learner_process, rollout_model, sync_client, streams, tmp_path):
    model, tokenizer = rollout_model
    task = TwoToolTask(tokenizer, seed=1)
    groups = [task.group(model, 0, size=4, index=i) for i in range(N_GROUPS)]
    for g in groups:
        sync_client.xadd(streams.groups, encode_entry(g, id=g.group_id))
    learner = learner_process(estimator="slca", lr=1e-4, max_staleness=100)
    learner.start(max_steps=N_GROUPS)
    before = wait_for_version(sync_client, streams, 2, learner)
    learner.kill()  # SIGKILL: no chance to flush anything
    killed_at = _checkpoint_state(tmp_path)
    assert 0 < killed_at["step"] < N_GROUPS, "the kill did not land mid-run"

    learner.start(max_steps=N_GROUPS)
    learner.proc.wait(timeout=180)
    assert learner.proc.returncode == 0, learner.log_text()

    state = _checkpoint_state(tmp_path)
    assert state["step"] == N_GROUPS
    assert sorted(state["consumed"]) == sorted(g.group_id for g in groups), "a group was skipped or applied twice"
    lines = [json.loads(x) for x in (tmp_path / "learner" / "metrics.jsonl").read_text().splitlines()]
    applied = [gid for line in lines for gid in line["groups"]]
    assert len(applied) == len(set(applied)), f"a group was applied twice: {applied}"
    versions = [line["version"] for line in lines]
    assert versions == sorted(set(versions)), f"published versions did not keep increasing: {versions}"
    latest = wait_for_version(sync_client, streams, before.version, learner)
    assert latest.version > before.version and latest.verify() == []
    pending = sync_client.xpending(streams.groups, "learner")
    assert pending["pending"] == 0, "entries left unacknowledged"
