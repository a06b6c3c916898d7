"""The SFT data labels (the `slca sft` smoke runs are in tests/ops/experiments/warmstart)."""

from __future__ import annotations

from learner.sft_data import IGNORE, encode_conversation


def test_sft_labels_cover_assistant_turns_only(rollout_model):
    _, tokenizer = rollout_model
    messages = [
        {"role": "system", "content": "tools here"},
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": '<tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>'},
        {"role": "tool", "content": '<tool_response>\n{"t": 20}\n</tool_response>'},
        {"role": "assistant", "content": "It is 20 degrees."},
    ]
    ex = encode_conversation(tokenizer, messages, 4096)
    labelled = tokenizer.decode([t for t, lab in zip(ex.input_ids, ex.labels) if lab != IGNORE])
    assert labelled == messages[2]["content"] + "<|im_end|>" + messages[4]["content"] + "<|im_end|>"
    assert encode_conversation(tokenizer, messages, 10) is None
