"""End to end through real Redis: rollout groups on `slca:groups` consumed by the real `slca learn` process."""

from __future__ import annotations

import json

import pytest

from slca.contracts import encode_entry
from tests.learner.two_tools import TwoToolTask, choice_probability, exec_mean
from tests.support.learner import load_weights, wait_for_version

MAX_STEPS = 25


@pytest.mark.slow  # a real `slca learn` process, up to MAX_STEPS rounds of sample → step → publish → load
def test_slca_grpo_learns_the_two_tool_choice(learner_process, rollout_model, sync_client, streams, tmp_path):
    """SLCA-GRPO raises the execution reward from chance to ≥ 0.9 within MAX_STEPS steps (seeded).

    The task and why it is honest: see `tests/learner/two_tools.py` (a random tiny model, generation
    constrained to the two candidate calls, real sampling with the model's own logprobs; the summary's
    preference reward is noise). Loop: sample a group of 8 with the weights of version v → XADD it to
    `slca:groups` → the learner process consumes it, steps, publishes v+1 (SET + PUBLISH) → the sampler
    loads v+1 from the published safetensors (sha256 checked) → repeat."""
    model, tokenizer = rollout_model
    task = TwoToolTask(tokenizer, seed=0)
    learner = learner_process(estimator="slca", lr=5e-4, seed=0)
    learner.start()
    p_start = choice_probability(model, task)
    assert 0.3 <= p_start <= 0.7, f"the choice is not at chance before training: p(gold) = {p_start:.3f}"
    version, history = 0, []
    for step in range(MAX_STEPS):
        group = task.group(model, version, size=8, index=step)
        history.append(exec_mean(group))
        if len(history) >= 3 and min(history[-3:]) >= 0.9:
            break
        sync_client.xadd(streams.groups, encode_entry(group, id=group.group_id))
        manifest = wait_for_version(sync_client, streams, version, learner)
        load_weights(model, manifest)
        version = manifest.version
    p_end = choice_probability(model, task)
    print(f"exec reward per step: {history}; p(gold) {p_start:.3f} -> {p_end:.3f} at version {version}")
    assert p_end >= 0.9
    assert min(history[-3:]) >= 0.9, f"did not learn within {MAX_STEPS} steps: {history}"
    lines = [json.loads(x) for x in (tmp_path / "learner" / "metrics.jsonl").read_text().splitlines()]
    assert [x["version"] for x in lines] == list(range(1, len(lines) + 1))
    assert all(x.get("summary/adv_abs_mean", 0) > 0 or x["skipped_zero"] for x in lines)
    stats = sync_client.xrange(streams.stats("stats:learner"))
    assert len(stats) == len(lines) and set(stats[0][1]) >= {b"step", b"version", b"loss", b"kl", b"clip_frac", b"ts"}
