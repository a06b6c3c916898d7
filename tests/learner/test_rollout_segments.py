"""The learner's in-process rollouts tag tokens with serve's segmenter (`slca.chat.segments`): one set of rules,
`<think>` included (the learner's own copy used to tag reasoning as summary)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from learner.rollout_local import Sample, build_trajectory, segment_generated
from slca.chat.segments import generated_kinds, spans_of
from slca.contracts import SegmentKind

S, C, R = SegmentKind.SUMMARY, SegmentKind.TOOL_CALL, SegmentKind.REASONING


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]


@pytest.mark.parametrize(
    "text, kinds",
    [
        ("<think>which tool?</think>The answer is 4.", [R, S]),
        ('<think>maybe <tool_call>{"name": "f"}</tool_call></think>No call.', [R, S]),
        ('Let me check.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', [S, C]),
        ('<think>a</think><tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', [R, C]),
    ],
)
def test_rollout_segments_are_serves(tok, text, kinds):
    ids = _ids(tok, text)
    spans = segment_generated(tok, ids)
    assert [kind for _, _, kind in spans] == kinds
    assert spans == spans_of(generated_kinds(tok, ids, set(tok.all_special_ids)))
    assert spans[0][0] == 0 and spans[-1][1] == len(ids) and spans[-1][2] == kinds[-1]  # eos closes the last


def test_a_rollout_trajectory_carries_its_reasoning_segment(tok):
    ids = _ids(tok, "<think>hmm</think>Hello.")
    prompt = tok.encode("Hi", add_special_tokens=False)
    trajectory = build_trajectory(tok, "t1", prompt, Sample(ids, [-0.5] * len(ids)), [], version=0)
    assert [s.kind for s in trajectory.segments] == [SegmentKind.SYSTEM, R, S]


def test_spans_of_runs():
    assert spans_of([S, S, C, C, S]) == [(0, 2, S), (2, 4, C), (4, 5, S)] and spans_of([]) == []
