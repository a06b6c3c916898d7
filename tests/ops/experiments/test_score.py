"""`slca score`: one answer to one real task, scored by HierR through the shipped entry point (JSON on stdin)."""

from __future__ import annotations

import io
import json

import pytest

from sim.provider import make_provider
from sim.settings import SimSettings
from sim.tasks import demonstration, load_tasks
from sim.tasks.generate import base_intent
from slca.cli import main

REFUSAL = "Sorry, I can't do that: none of the available tools can handle this request."


@pytest.fixture(scope="module")
def test_tasks():
    return load_tasks("everyday", "test")


def score(monkeypatch, capsys, request: dict | str) -> tuple[int, dict | None, str]:
    text = request if isinstance(request, str) else json.dumps(request)
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    rc = main(["score"])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), err


def test_convert_with_wrong_or_missing_arguments_is_not_a_success(monkeypatch, capsys, test_tasks):
    task = next(t for t in test_tasks if base_intent(t) == "convert" and len(t.ground_truth.calls[0].arguments) == 3)
    gold = task.ground_truth.calls[0]
    right = {
        "task_id": task.task_id,
        "calls": [gold.model_dump(include={"name", "arguments"})],
        "reply": f"That is {task.ground_truth.facts[0]}.",
    }
    rc, out, _ = score(monkeypatch, capsys, right)
    assert rc == 0 and out["success"] == 1.0 and out["exec"] == pytest.approx(1.0) and out["pref"] == 1.0
    assert out["gold"]["calls"][0]["arguments"] == gold.arguments and out["gold"]["facts"] == task.ground_truth.facts
    assert {"format", "name", "key", "value", "parallel", "pref_grounded", "pref_answers"} <= set(out["components"])

    wrong = {
        "value": gold.arguments["value"] + 1,
        "from_unit": gold.arguments["to_unit"],
        "to_unit": gold.arguments["from_unit"],
    }
    rc, out, _ = score(monkeypatch, capsys, {**right, "calls": [{"name": gold.name, "arguments": wrong}]})
    assert out["exec"] == pytest.approx(0.80) and out["exec"] < 0.85 and out["success"] == 0.0
    assert out["components"]["value"] == 0.0
    rc, out, _ = score(monkeypatch, capsys, {**right, "calls": [{"name": gold.name, "arguments": {}}]})
    assert out["exec"] == pytest.approx(0.65) and out["success"] == 0.0
    assert out["calls"][0]["error"]  # the real tool refused the call, as the agent loop would have seen


def test_claiming_success_on_an_abstention_task_is_not_a_refusal(monkeypatch, capsys, test_tasks):
    task = next(t for t in test_tasks if t.ground_truth.refusal)
    rc, claim, _ = score(monkeypatch, capsys, {"task_id": task.task_id, "reply": "Done! I have taken care of that"})
    assert rc == 0 and claim["gold"]["refusal"] is True
    rc, right, _ = score(monkeypatch, capsys, {"task_id": task.task_id, "reply": REFUSAL})
    assert claim["success"] == 0.0 and right["success"] == 1.0
    assert claim["pref"] < right["pref"]
    invented = {"task_id": task.task_id, "calls": [{"name": "book_a_miracle", "arguments": {}}], "reply": REFUSAL}
    rc, out, _ = score(monkeypatch, capsys, invented)
    assert out["success"] == 0.0 and out["calls"][0]["valid"] is False


@pytest.mark.parametrize(
    "request_text, message",
    [
        ("not json", "not JSON"),
        ("[1, 2]", "one JSON object"),
        (json.dumps({"task_id": "everyday-nope"}), "no task 'everyday-nope'"),
        (json.dumps({"task_id": 3}), "'task_id' must be a string"),
        (json.dumps({"task_id": "x", "calls": {"name": "a"}}), "'calls' must be a list"),
        (
            json.dumps({"task_id": "x", "calls": [{"name": "a", "arguments": [1]}]}),
            "calls[0].arguments must be an object",
        ),
        (json.dumps({"task_id": "x", "pack": "nope"}), "unknown task pack"),
        (json.dumps({"task_id": "x", "answer": "hi"}), "unknown field(s) answer"),
    ],
)
def test_bad_input_is_one_line_error(monkeypatch, capsys, request_text, message):
    rc, _, err = score(monkeypatch, capsys, request_text)
    assert rc == 2 and message in err and "Traceback" not in err and err.count("\n") == 1


def test_every_intents_demonstration_is_a_success(monkeypatch, capsys, test_tasks):
    """The warm start's own answers (gold calls, then the intent's reply stating the facts or declining) pass every
    check of the new reward: no check rejects a right answer."""
    provider = make_provider(SimSettings())
    one_per_intent = {t.intent: t for t in test_tasks}.values()
    for task in one_per_intent:
        reply = demonstration(task, provider)[-1]["content"]
        calls = [c.model_dump(include={"name", "arguments"}) for c in task.ground_truth.calls]
        rc, out, _ = score(monkeypatch, capsys, {"task_id": task.task_id, "calls": calls, "reply": reply})
        assert out["success"] == 1.0, (task.intent, reply, out["components"])
        c = out["components"]
        assert c["pref_grounded"] == c["pref_answers"] == c["pref_no_raw_json"] == 1.0, (task.intent, reply)
