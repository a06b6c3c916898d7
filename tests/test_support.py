"""The shared test helpers themselves (tests/support): the trajectory factory and the wait."""

from __future__ import annotations

import itertools

import pytest

from slca.contracts import SegmentKind as K
from tests.support.trajectories import trajectory
from tests.support.wait import wait_for


def test_a_layout_gives_its_segments_turns_and_logprobs():
    t = trajectory([(K.SYSTEM, 2), (K.TOOL_CALL, 3), (K.TOOL_RESULT, 2), (K.SUMMARY, 1)], task_id="x")
    assert [(s.kind, s.start, s.end, s.turn) for s in t.segments] == [
        (K.SYSTEM, 0, 2, 0),
        (K.TOOL_CALL, 2, 5, 0),
        (K.TOOL_RESULT, 5, 7, 0),
        (K.SUMMARY, 7, 8, 1),
    ]
    assert t.logprobs == [None, None, -0.5, -0.5, -0.5, None, None, -0.5] and t.task_id == "x"


def test_fields_win_over_what_the_factory_computed():
    t = trajectory([(K.USER, 1), (K.SUMMARY, 2)], tokens=[1, 2, 3], logprobs=[None, -1.0, -2.0], meta={"a": 1})
    assert t.tokens == [1, 2, 3] and t.logprobs == [None, -1.0, -2.0] and t.meta == {"a": 1}


def test_a_template_member_is_a_copy_with_its_task_id_and_version():
    base = trajectory()
    m = trajectory(template=base, task_id="task-a", member=3, policy_version=2)
    assert (m.id, m.task_id, m.policy_version, m.tokens) == ("task-a-r3", "task-a", 2, base.tokens)


def test_wait_for_returns_the_first_truthy_value():
    counter = itertools.count()
    assert wait_for(lambda: next(counter) >= 3 and "done", 5, interval=0.001) == "done"


def test_wait_for_names_what_it_waited_for_and_adds_the_detail():
    with pytest.raises(
        AssertionError, match=r"timed out after 0.05s waiting for the thing \(last value: 0\)\nlog tail"
    ):
        wait_for(lambda: 0, 0.05, "the thing", interval=0.01, detail=lambda: "log tail")


def test_wait_for_gives_up_at_once_when_the_process_died():
    with pytest.raises(AssertionError, match="the process under test exited"):
        wait_for(lambda: None, 60, "never", alive=lambda: False)
