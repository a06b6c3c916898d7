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


def test_sft_smoke_on_tiny(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "sft-out"
    rc = main(["--set", "learner.sft_batch=2", "sft", "--model", str(tiny_model_dir), "--steps", "1",
               "--eval-tasks", "0", "--out", str(out)])  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "sft-summary.json").read_text())
    assert summary["steps"] == 1 and summary["first_loss"] > 0
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
