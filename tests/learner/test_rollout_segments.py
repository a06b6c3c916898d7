"""The learner's in-process rollouts tag tokens with serve's segmenter (`slca.chat.segments`): one set of rules,
`<think>` included (the learner's own copy used to tag reasoning as summary)."""

from __future__ import annotations

import pytest

from learner.rollout_local import Sample, build_trajectory, segment_generated
from slca.chat.segments import generated_kinds, spans_of
from slca.contracts import SegmentKind

S, C, R = SegmentKind.SUMMARY, SegmentKind.TOOL_CALL, SegmentKind.REASONING


def _ids(hf_tokenizer, text: str) -> list[int]:
    return hf_tokenizer.encode(text, add_special_tokens=False) + [hf_tokenizer.eos_token_id]


@pytest.mark.parametrize(
    "text, kinds",
    [
        ("<think>which tool?</think>The answer is 4.", [R, S]),
        ('<think>maybe <tool_call>{"name": "f"}</tool_call></think>No call.', [R, S]),
        ('Let me check.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', [S, C]),
        ('<think>a</think><tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', [R, C]),
    ],
)
def test_rollout_segments_are_serves(hf_tokenizer, text, kinds):
    ids = _ids(hf_tokenizer, text)
    spans = segment_generated(hf_tokenizer, ids)
    assert [kind for _, _, kind in spans] == kinds
    assert spans == spans_of(generated_kinds(hf_tokenizer, ids, set(hf_tokenizer.all_special_ids)))
    assert spans[0][0] == 0 and spans[-1][1] == len(ids) and spans[-1][2] == kinds[-1]  # eos closes the last


def test_a_rollout_trajectory_carries_its_reasoning_segment(hf_tokenizer):
    ids = _ids(hf_tokenizer, "<think>hmm</think>Hello.")
    prompt = hf_tokenizer.encode("Hi", add_special_tokens=False)
    trajectory = build_trajectory(hf_tokenizer, "t1", prompt, Sample(ids, [-0.5] * len(ids)), [], version=0)
    assert [s.kind for s in trajectory.segments] == [SegmentKind.SYSTEM, R, S]


def test_spans_of_runs():
    assert spans_of([S, S, C, C, S]) == [(0, 2, S), (2, 4, C), (4, 5, S)] and spans_of([]) == []
