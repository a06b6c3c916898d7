"""Smoke runs of the learner's commands on the tiny model, and the SFT data labels."""

from __future__ import annotations

import json

import pytest

from learner.sft_data import IGNORE, encode_conversation
from slca.cli import main


def test_sft_labels_cover_assistant_turns_only(rollout_model):
    _, tokenizer = rollout_model
    messages = [
        {"role": "system", "content": "tools here"},
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": '<tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>'},
        {"role": "tool", "content": "<tool_response>\n{\"t\": 20}\n</tool_response>"},
        {"role": "assistant", "content": "It is 20 degrees."},
    ]
    ex = encode_conversation(tokenizer, messages, 4096)
    labelled = tokenizer.decode([t for t, lab in zip(ex.input_ids, ex.labels) if lab != IGNORE])
    assert labelled == messages[2]["content"] + "<|im_end|>" + messages[4]["content"] + "<|im_end|>"
    assert encode_conversation(tokenizer, messages, 10) is None


def test_unknown_estimator_is_a_cli_error(capsys):
    assert main(["train", "--estimator", "nope"]) == 2
    assert "known: grpo, rltr, slca, toolpo" in capsys.readouterr().err


def test_sft_smoke_on_tiny(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "sft-out"
    rc = main(["--set", "learner.sft_batch=2", "sft", "--model", str(tiny_model_dir), "--steps", "1",
               "--eval-tasks", "0", "--out", str(out)])  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "sft-summary.json").read_text())
    assert summary["steps"] == 1 and summary["first_loss"] > 0
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()


def test_train_scores_with_the_configured_worker_settings_and_the_trained_models_tokenizer(tmp_path):
    from learner.controlled import scoring_settings
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
    rc = main(["--set", f"common.model={tiny_model_dir}", "--set", f"common.redis_url={redis_url}",
               "--set", f"common.data_dir={tmp_path}", "--set", "serve.engine=hf", "--set", "serve.torch_threads=1",
               "--set", "learner.train_group_size=2", "--set", "learner.train_max_tokens=8",
               "--set", "workers.scorer_version=hierr-configured",
               "train", "--estimator", "grpo", "--steps", "1", "--log", str(log)])  # fmt: skip
    assert rc == 0
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["version"] == 1 and line["estimator"] == "grpo" and line["tokens"] > 0
    assert line["scorer_version"] == "hierr-configured" and line["swap_s"] >= 0
    assert 0 <= line["tool_turns_mean"] <= 3  # at most max_turns (3) model turns per episode
    assert (tmp_path / "learner" / "train-grpo-0" / "weights" / "v1" / "manifest.json").is_file()
    messages = [m for m in iter(lambda: announcements.get_message(timeout=1.0), None) if m["type"] == "pmessage"]
    assert [load_json(WeightManifest, m["data"]).version for m in messages] == [1]
    assert redis_client.get("slca:weights:latest") is None
