"""Smoke runs of `slca train` (the controlled harness in ops/experiments) on the tiny model."""

from __future__ import annotations

import json

import pytest

from slca.cli import main


def test_unknown_estimator_is_a_cli_error(capsys):
    assert main(["train", "--estimator", "nope"]) == 2
    assert "known: grpo, rltr, slca, toolpo" in capsys.readouterr().err
    assert main(["train"]) == 2
    assert "--estimator is required" in capsys.readouterr().err


def test_list_estimators_prints_the_registry(capsys):
    from learner.advantages import ESTIMATORS

    assert main(["train", "--list-estimators"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(ESTIMATORS)
    assert all("arXiv" in line for line in lines)  # each docstring's first line cites its paper


def test_train_scores_with_the_configured_worker_settings_and_the_trained_models_tokenizer(tmp_path):
    from ops.experiments.train.controlled import scoring_settings
    from slca.config import load_config

    model_dir = tmp_path / "some-sft-model"
    scoring = scoring_settings(load_config(overrides=["workers.no_call_penalty=-0.75"]), model_dir)
    assert scoring.no_call_penalty == -0.75 and scoring.tokenizer == str(model_dir)
    configured = load_config(overrides=[f"workers.tokenizer={tmp_path}"])
    assert scoring_settings(configured, model_dir).tokenizer == str(tmp_path)


def test_train_smoke_on_tiny__scores_with_workers_settings__publishes_through_the_redis_announcement(
    tmp_path, tiny_model_dir, redis_url, redis_client
):
    pytest.importorskip("serve.app")
    from slca.contracts import WeightManifest
    from slca.contracts.wire import load_json

    announcements = redis_client.pubsub()
    announcements.psubscribe("slca:train:*:weights")  # the in-process server's own prefix: a live system's
    log = tmp_path / "train.jsonl"  # servers on this Redis (slca:weights) are never swapped by a controlled run
    rc = main(
        [
            "--set",
            f"common.model={tiny_model_dir}",
            "--set",
            f"common.redis_url={redis_url}",
            "--set",
            f"common.data_dir={tmp_path}",
            "--set",
            "serve.engine=hf",
            "--set",
            "serve.torch_threads=1",
            "--set",
            "learner.train_group_size=2",
            "--set",
            "learner.train_max_tokens=8",
            "--set",
            "workers.scorer_version=hierr-configured",
            "--set",
            "learner.groups_per_step=2",
            "--set",
            "learner.screen_success_variance=false",  # the tiny model never succeeds: screening would train nothing
            "--set",
            "learner.loss.kl_beta=0.1",
            "train",
            "--estimator",
            "grpo",
            "--steps",
            "2",
            "--log",
            str(log),
        ]
    )
    assert rc == 0
    line, second = [json.loads(x) for x in log.read_text().splitlines()]
    # on-policy: step 2 samples from v1, the version step 1 published (never a promoted version held back)
    assert (line["rollout_version_max"], second["rollout_version_min"], second["version"]) == (0, 1, 2)
    assert line["version"] == 1 and line["estimator"] == "grpo" and line["tokens"] > 0
    assert line["scorer_version"] == "hierr-configured" and line["swap_s"] >= 0
    assert 0 <= line["tool_turns_mean"] <= 3  # at most max_turns (3) model turns per episode
    assert len(set(line["task_ids"])) == 2 and line["task_id"] == line["task_ids"][0]  # two distinct tasks
    assert line["groups_in"] == 2 and 0 <= line["success_mean"] <= 1 and line["lr"] > 0
    assert (tmp_path / "learner" / "train-grpo-0" / "weights" / "v2" / "manifest.json").is_file()
    messages = [m for m in iter(lambda: announcements.get_message(timeout=1.0), None) if m["type"] == "pmessage"]
    assert [load_json(WeightManifest, m["data"]).version for m in messages] == [1, 2]
    assert redis_client.get("slca:weights:latest") is None


def test_steps_0_needs_minutes(capsys):
    assert main(["train", "--estimator", "grpo", "--steps", "0"]) == 2
    assert "--minutes" in capsys.readouterr().err


def test_budget_stops_at_the_steps_or_the_minutes_whichever_comes_first(monkeypatch):
    from ops.experiments.train import controlled

    now = [1000.0]
    monkeypatch.setattr(controlled.time, "monotonic", lambda: now[0])
    steps_and_minutes = controlled.Budget(steps=3, minutes=1.0)
    assert steps_and_minutes.allows(2) and not steps_and_minutes.allows(3)
    minutes_only = controlled.Budget(steps=0, minutes=1.0)
    assert minutes_only.allows(10_000)
    now[0] += 60
    assert not minutes_only.allows(0) and not steps_and_minutes.allows(0)
    assert controlled.Budget(steps=3, minutes=0.0).allows(2)
    assert minutes_only.from_now().allows(0)


def _args(**kw):
    from types import SimpleNamespace

    return SimpleNamespace(**{"pack": "everyday", "seed": 0, "tasks_file": None, "task_ids": None, **kw})


def test_training_tasks_from_a_file__narrowed_to_ids__never_held_out_ones(tmp_path):
    from ops.experiments.train.controlled import training_tasks
    from sim.tasks import load_tasks, write_jsonl
    from slca.cli import CliError

    train = load_tasks("everyday", "train")
    path = tmp_path / "fixed.jsonl"
    write_jsonl(train[:3], path)
    assert [t.task_id for t in training_tasks(_args(tasks_file=str(path)))] == [t.task_id for t in train[:3]]
    picked = f"{train[2].task_id}, {train[0].task_id}"
    assert [t.task_id for t in training_tasks(_args(tasks_file=str(path), task_ids=picked))] == [
        train[2].task_id,
        train[0].task_id,
    ]
    assert [t.task_id for t in training_tasks(_args(task_ids=train[7].task_id))] == [train[7].task_id]
    with pytest.raises(CliError, match="not among the training tasks: nope"):
        training_tasks(_args(tasks_file=str(path), task_ids="nope"))
    write_jsonl([*train[:1], *load_tasks("everyday", "test")[:1]], path)
    with pytest.raises(CliError, match="not train tasks"):
        training_tasks(_args(tasks_file=str(path)))


def test_pick_tasks_draws_distinct_tasks_and_one_group_draws_as_before():
    import random

    from ops.experiments.train.controlled import pick_tasks

    tasks = list(range(10))
    picked = pick_tasks(random.Random(3), tasks, 4)
    assert len(set(picked)) == 4 and pick_tasks(random.Random(3), tasks, 40) == pick_tasks(random.Random(3), tasks, 10)
    assert pick_tasks(random.Random(5), tasks, 1) == [random.Random(5).choice(tasks)]  # the earlier runs' draws


def test_group_means_are_over_every_member_of_the_steps_groups():
    from ops.experiments.train.controlled import group_means
    from tests.learner.advantages.groups import K, reward, rollout_group
    from tests.support.trajectories import trajectory

    spec = [(K.USER, 1), (K.TOOL_CALL, 2), (K.TOOL_RESULT, 1), (K.SUMMARY, 1)]
    one = rollout_group(
        [trajectory(spec, member=i) for i in range(2)],
        [
            reward(0, 1.0, 0.5, components={"success": 1.0}),
            reward(1, 0.0, 0.5, components={"success": 0.0}),
        ],
    )
    two = rollout_group(
        [trajectory(spec, member=i) for i in range(2)],
        [
            reward(0, 1.0, 1.0, components={"success": 1.0}),
            reward(1, 1.0, 1.0),
        ],
    )
    means = group_means([one, two])
    assert means["exec_mean"] == 0.75 and means["pref_mean"] == 0.75 and means["tool_turns_mean"] == 1.0
    assert means["success_mean"] == pytest.approx(2 / 3)  # the member without a 'success' component left out
    assert "success_mean" not in group_means([rollout_group([trajectory(spec)], [reward(0, 1.0, 1.0)])])
