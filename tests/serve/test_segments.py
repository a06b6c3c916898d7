"""Segment tags from incremental decode of token ids, and prompt attribution through the chat template."""

from __future__ import annotations

import pytest

from serve.prompting import continuation_ids, prompt_chunks, render, to_template_messages
from serve.trajectory import TrajectoryBuilder
from slca.chat.segments import generated_kinds, token_texts
from slca.contracts import SegmentKind

S, C, R = SegmentKind.SUMMARY, SegmentKind.TOOL_CALL, SegmentKind.REASONING


def kinds_by_text(hf_tokenizer, text: str, eos: bool = True):
    ids = hf_tokenizer.encode(text, add_special_tokens=False) + ([hf_tokenizer.eos_token_id] if eos else [])
    kinds = generated_kinds(hf_tokenizer, ids, {hf_tokenizer.eos_token_id})
    texts = token_texts(hf_tokenizer, ids)
    return ids, kinds, texts


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Just an answer.", {S}),
        ('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', {C}),
        ("<think>let me see</think>The answer is 4.", {R, S}),
        ('Let me check.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>', {S, C}),
        ('<think>maybe <tool_call>{"name": "f"}</tool_call></think>No call.', {R, S}),
        ('<tool_call>\n{"name": "f", "argu', {C}),  # unterminated: still the call it started
    ],
)
def test_kinds_follow_the_text_spans(hf_tokenizer, text, expected):
    ids, kinds, texts = kinds_by_text(hf_tokenizer, text)
    assert len(kinds) == len(ids) and set(kinds) == expected
    joined = "".join(texts)
    assert joined == text + hf_tokenizer.eos_token
    for t, k in zip(texts, kinds):
        if "<tool_call>"[:3] in t and k != C:
            assert k == R  # a call inside reasoning stays reasoning


def test_end_of_turn_token_belongs_to_the_segment_it_closes(hf_tokenizer):
    _, kinds, _ = kinds_by_text(hf_tokenizer, '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
    assert kinds[-1] == C
    _, kinds, _ = kinds_by_text(hf_tokenizer, "Plain answer")
    assert kinds[-1] == S


def test_delimiters_are_part_of_the_call(hf_tokenizer):
    ids, kinds, texts = kinds_by_text(
        hf_tokenizer, 'Sure.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', eos=False
    )
    first_call = kinds.index(C)
    assert "".join(texts[first_call:]).lstrip().startswith("<tool_call>")
    assert all(k == S for k in kinds[:first_call])
    assert "".join(texts[:first_call]).strip() == "Sure."


def test_multibyte_characters_are_attributed_once(hf_tokenizer):
    ids, kinds, texts = kinds_by_text(hf_tokenizer, "Température: 20 °C ☀️", eos=False)
    assert "".join(texts) == "Température: 20 °C ☀️"


def test_prompt_chunks_reproduce_the_template_exactly(hf_tokenizer):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    msgs = to_template_messages([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], tools)
    chunks = prompt_chunks(hf_tokenizer, msgs)
    assert [k for _, k in chunks] == [SegmentKind.SYSTEM, SegmentKind.USER]
    assert hf_tokenizer.decode([t for ids, _ in chunks for t in ids]) == render(hf_tokenizer, msgs, True)
    assert "<tools>" in msgs[0]["content"] and "Be brief." in msgs[0]["content"]


def test_default_system_text_is_system(hf_tokenizer):
    chunks = prompt_chunks(hf_tokenizer, [{"role": "user", "content": "hi"}])
    assert [k for _, k in chunks] == [SegmentKind.SYSTEM, SegmentKind.USER]


@pytest.mark.parametrize("closed", [True, False])
def test_continuation_after_a_sampled_turn(hf_tokenizer, closed):
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "calling"}]
    new = [{"role": "tool", "content": "<tool_response>\n{}\n</tool_response>"}]
    text = hf_tokenizer.decode(continuation_ids(hf_tokenizer, history, new, closed))
    assert text.startswith("\n<|im_start|>tool" if closed else "<|im_end|>\n<|im_start|>tool")
    assert text.endswith("<|im_start|>assistant\n")


def test_assistant_tool_calls_render_as_hermes_blocks():
    msgs = to_template_messages(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
        ],
        None,
    )
    assert msgs[0]["content"] == '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert msgs[1] == {"role": "tool", "content": '<tool_response>\n{"ok": true}\n</tool_response>'}


def test_builder_merges_runs_and_flags_mixed_versions():
    b = TrajectoryBuilder()
    b.add_environment([1, 2], SegmentKind.SYSTEM, 0)
    b.add_environment([3], SegmentKind.USER, 0)
    b.add_generated([4, 5, 6], [-0.1, -0.2, -0.3], [C, C, S], 0, [0, 0, 1])
    traj = b.build(task_id="t", tools=[], messages=[], tool_calls=[], ground_truth=None, meta={}, fallback_version=0)
    assert [(s.start, s.end, s.kind) for s in traj.segments] == [
        (0, 2, SegmentKind.SYSTEM),
        (2, 3, SegmentKind.USER),
        (3, 5, C),
        (5, 6, S),
    ]
    assert traj.mixed_version and traj.policy_version == 1


@pytest.mark.parametrize("seed", range(5))
def test_windowed_incremental_decode_equals_full_decode(hf_tokenizer, seed):
    import random

    rng = random.Random(seed)
    ids = [rng.randrange(len(hf_tokenizer)) for _ in range(200)] + hf_tokenizer.encode(
        " end.", add_special_tokens=False
    )
    texts = token_texts(hf_tokenizer, ids)
    assert "".join(texts) == hf_tokenizer.decode(ids, skip_special_tokens=False)
