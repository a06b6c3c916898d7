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
            "train",
            "--estimator",
            "grpo",
            "--steps",
            "1",
            "--log",
            str(log),
        ]
    )
    assert rc == 0
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["version"] == 1 and line["estimator"] == "grpo" and line["tokens"] > 0
    assert line["scorer_version"] == "hierr-configured" and line["swap_s"] >= 0
    assert 0 <= line["tool_turns_mean"] <= 3  # at most max_turns (3) model turns per episode
    assert (tmp_path / "learner" / "train-grpo-0" / "weights" / "v1" / "manifest.json").is_file()
    messages = [m for m in iter(lambda: announcements.get_message(timeout=1.0), None) if m["type"] == "pmessage"]
    assert [load_json(WeightManifest, m["data"]).version for m in messages] == [1]
    assert redis_client.get("slca:weights:latest") is None
