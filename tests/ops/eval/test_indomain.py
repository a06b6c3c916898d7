"""In-domain metrics by hand and from server-recorded calls, and episodes through serve's own agent loop (an
in-process server on the tiny model, POST /v1/agent/runs) scored end to end."""

import asyncio

import pytest

from ops.eval.indomain import EvalRunError, argument_match, run_request, run_tasks, score, success, summarize
from ops.eval.server import BATCH_WAIT_MS, eval_config, eval_server
from slca.config import Config
from slca.contracts import GoldCall, ToolCallRecord
from workers.scoring.match import loose_equal, name_f1


@pytest.mark.parametrize("a,b,eq", [(" Paris", "paris", True), (1, 1.0, True), ("true", True, True), (0, False, True),
                                    ({"a": [1, 2]}, {"a": [1, 2]}, True), ("2", 3, False), ("x", None, False)])
def test_loose_equal_as_eval_matches(a, b, eq):
    assert loose_equal(a, b) is eq and loose_equal(b, a) is eq


def test_name_f1():
    assert name_f1([], []) == 1.0
    assert name_f1(["a"], []) == 0.0
    assert name_f1(["a", "a", "b"], ["a", "b"]) == pytest.approx(0.8)


def test_argument_match_and_success():
    gold = [GoldCall(name="w", arguments={"city": "Oslo", "unit": "c"}), GoldCall(name="w", arguments={"city": "Rome"})]
    pred = [{"name": "w", "arguments": {"city": "rome"}}, {"name": "w", "arguments": {"city": "Oslo", "unit": "f"}}]
    assert argument_match(pred, gold) == pytest.approx((0.5 + 1.0) / 2)
    assert not success(pred, gold, True)
    pred[1]["arguments"]["unit"] = "C"
    assert success(pred, gold, True)
    assert success([], [], False) and not success(pred, [], False)
    assert not success(pred[:1], gold, True)


@pytest.fixture(scope="module")
def tasks():
    from ops.feed.tasks import load_pack

    split = load_pack("everyday", "test")
    with_tool = next(t for t in split if t.ground_truth.tool_needed and t.ground_truth.calls[0].arguments)
    no_tool = next(t for t in split if not t.ground_truth.tool_needed)
    return with_tool, no_tool


def _record(turn: int, name: str | None, arguments, valid: bool = True) -> ToolCallRecord:
    return ToolCallRecord(turn=turn, block=0, name=name, arguments=arguments, valid=valid)


def test_score_reads_the_calls_the_server_recorded(tasks):
    with_tool, no_tool = tasks
    gold = with_tool.ground_truth.calls[0]
    right = score(with_tool, [_record(0, gold.name, dict(gold.arguments))])
    assert right["success"] and right["name_f1"] == 1.0 and right["argument_match"] == 1.0
    assert right["tool_turns"] == 1 and right["invalid_calls"] == 0

    key = next(iter(gold.arguments))
    wrong = score(with_tool, [_record(0, gold.name, {**gold.arguments, key: "certainly not this"})])
    assert not wrong["success"] and wrong["name_f1"] == 1.0 and wrong["argument_match"] < 1.0

    # a malformed call beside the right one: the right call still counts, success does not
    noisy = score(with_tool, [_record(0, gold.name, dict(gold.arguments)), _record(1, None, None, valid=False)])
    assert noisy["argument_match"] == 1.0 and not noisy["success"]
    assert noisy["invalid_calls"] == 1 and noisy["tool_turns"] == 2

    assert score(no_tool, [])["success"] and not score(no_tool, [_record(0, gold.name, {})])["success"]


def test_run_request_is_greedy_unrecorded_and_returns_the_trajectory(tasks):
    body = run_request(tasks[0], max_tokens=32, max_turns=2)
    assert body["temperature"] == 0.0 and body["record"] is False and body["return_trajectories"] is True
    assert body["n"] == 1 and body["max_turns"] == 2 and body["tools"] == tasks[0].tools


def test_eval_config_sets_the_model_under_test_and_gathers_bursts(tmp_path):
    from serve.settings import ServeSettings

    cfg = eval_config(Config(raw={"serve": {"batch_wait_ms": 2.0, "max_model_len": 1024}}), tmp_path, "hf", 1)
    serve = cfg.get(ServeSettings)
    assert cfg.common.model == str(tmp_path) and serve.engine == "hf" and serve.torch_threads == 1
    assert serve.batch_wait_ms == BATCH_WAIT_MS and serve.max_model_len == 1024
    with pytest.raises(ValueError, match="unknown engine"):
        eval_config(Config(), tmp_path, "tgi", None)


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    config = Config(raw={"common": {"data_dir": str(tmp_path_factory.mktemp("data"))}})
    with eval_server(config, tiny_model_dir, "hf", threads=1) as srv:
        yield srv


def test_episodes_run_through_the_servers_agent_loop(server, tasks):
    """The random tiny model writes no tool call (greedy, so every time): the no-tool task succeeds, the task that
    needs a call fails — scored from what the server's loop recorded."""
    with_tool, no_tool = tasks
    ordered = [with_tool, no_tool, with_tool]
    rows = asyncio.run(run_tasks(server.url, server.admin_token, ordered, max_tokens=12, max_turns=2, concurrency=2))
    assert [r["task_id"] for r in rows] == [t.task_id for t in ordered]
    assert [r["success"] for r in rows] == [False, True, False]
    assert rows[0]["name_f1"] == 0.0 and rows[0]["tool_turns"] == 0 and rows[0] == rows[2]  # greedy: same run
    s = summarize(rows)
    assert s["n"] == 3 and s["success"] == pytest.approx(1 / 3)


def test_a_refused_run_is_a_clear_error(server, tasks):
    with pytest.raises(EvalRunError, match=rf"task {tasks[0].task_id}: the server answered 400"):
        asyncio.run(run_tasks(server.url, server.admin_token, tasks[:1], max_tokens=10**6, max_turns=1, concurrency=1))
    with pytest.raises(ValueError, match="concurrency"):
        asyncio.run(run_tasks(server.url, None, tasks[:1], max_tokens=8, max_turns=1, concurrency=0))
