"""The soak's hostile cases (ops/bench/soak/cases.py): how a try is judged (its answers, the small chat beside it),
how tries make the report's rows and the verdict — on fake results — and every case held by a real server."""

from __future__ import annotations

import json
import logging
import time

import pytest

from ops.bench.soak import case_report, cases
from ops.bench.soak.case_report import CONTROL, CaseResult, case_rows, case_table, cases_held, cases_line
from ops.bench.soak.cases import Answer, Case, Seen, Target, allowed_s, log_text_since, run_case
from ops.bench.soak.report import verdict, write
from tests.ops.bench.test_soak_report import _clean, _samples

TARGET = Target("http://127.0.0.1:1")


def _error(code: str) -> bytes:
    return json.dumps({"error": {"message": "m", "type": "t", "param": None, "code": code}}).encode()


# --- one try ---------------------------------------------------------------------------------------
def test_judge_wants_every_answer_in_its_statuses_codes_and_bound():
    refused = Answer(400, _error("context_length_exceeded"), 0.2)
    assert cases._judge([refused] * 6, (400,), ("context_length_exceeded",), 5.0).held
    late = Answer(400, _error("context_length_exceeded"), 9.0)
    seen = cases._judge([refused, late], (400,), ("context_length_exceeded",), 5.0)
    assert not seen.held and "slowest 9.00s" in seen.detail and "wrong: 400" in seen.detail
    other_code = Answer(400, _error("invalid_request"), 0.1)
    assert not cases._judge([other_code], (400,), ("context_length_exceeded",), 5.0).held
    assert not cases._judge([Answer(None, b"", 1.0, "ConnectionResetError")], (400,), (), 5.0).held
    assert not cases._judge([Answer(500, b"boom", 0.1)], (200, 400), (), 5.0).held
    assert cases._judge([Answer(200, b"{}", 3.0)], (200, 400), ("x",), 5.0).held  # codes only judge a 4xx


def _fake_chats(monkeypatch, latencies: list[float], status: int = 200):
    """The small chat answers `status` after each of `latencies` in turn (alone before, meanwhile…, alone after)."""
    queue = list(latencies)

    def chat(t):
        time.sleep(0.02)  # the action (instant) has ended by the first small chat meanwhile
        return Answer(status, b"{}", queue.pop(0))

    monkeypatch.setattr(cases, "small_chat", chat)
    monkeypatch.setattr(cases, "LEAD_S", 0.0)


def test_a_case_holds_when_its_action_held_and_the_small_chat_kept_its_pace(monkeypatch):
    _fake_chats(monkeypatch, [0.4, 0.9, 0.5])
    result = run_case(Case("x", lambda t: Seen(True, "6 × 400")), TARGET)
    assert result.held and result.chat_alone_s == 0.5 and result.chat_worst_s == 0.9
    assert "6 × 400; 1 small chats meanwhile, worst 0.9s (alone 0.50s, allowed 5.50s)" == result.detail


def test_a_small_chat_held_up_meanwhile_fails_the_case(monkeypatch):
    # issue 36: six impossible prompts held a 0.1 s chat for 10 s — at each try: tried twice, held by neither
    _fake_chats(monkeypatch, [0.1, 10.0, 0.1] * 2)
    result = run_case(Case("impossible_prompts", lambda t: Seen(True, "6 × 400")), TARGET)
    assert not result.held and "held up: 200 in 10.00s" in result.detail and result.chat_worst_s == 10.0
    assert "tried 2 times (a small chat late): held 0 of 2" in result.detail
    assert allowed_s(0.1) == pytest.approx(5.1) and allowed_s(4.0) == 12.0


def test_one_late_small_chat_in_three_tries_is_the_systems_cycle_not_the_case(monkeypatch):
    # the learner's step or a weight swap under one try's chat; the next two tries keep the pace
    _fake_chats(monkeypatch, [2.5, 13.1, 2.5] + [2.5, 3.1, 2.5] * 2)
    result = run_case(Case("trickled_body", lambda t: Seen(True, "408")), TARGET)
    assert result.held and "held 2 of 3" in result.detail and result.chat_worst_s == 13.1
    _fake_chats(monkeypatch, [2.5, 13.1, 2.5] + [2.5, 3.1, 2.5] + [2.5, 14.0, 2.5])
    result = run_case(Case("trickled_body", lambda t: Seen(True, "408")), TARGET)
    assert not result.held and "held 1 of 3" in result.detail
    _fake_chats(monkeypatch, [0.1, 0.1, 0.1])  # a failed action is not tried again
    assert not run_case(Case("x", lambda t: Seen(False, "500")), TARGET).held


def test_a_failed_action_or_a_failed_small_chat_alone_fails_the_case(monkeypatch):
    _fake_chats(monkeypatch, [0.1, 0.1, 0.1])
    assert not run_case(Case("x", lambda t: Seen(False, "500")), TARGET).held
    _fake_chats(monkeypatch, [0.1, 0.1, 0.1], status=503)
    result = run_case(Case("x", lambda t: Seen(True, "ok")), TARGET)
    assert not result.held and "the small chat alone failed: 503" in result.detail


def test_a_case_with_nothing_to_attack_is_skipped_without_a_request(monkeypatch):
    monkeypatch.setattr(cases, "small_chat", lambda t: pytest.fail("no request for a skipped case"))
    weights = next(c for c in cases.CASES if c.name == "huge_weight_version")
    result = run_case(weights, TARGET)
    assert result.skipped and "weights.bind" in result.skipped and not result.held


def test_the_log_is_read_from_where_it_was_and_from_the_start_once_rotated(tmp_path):
    log = tmp_path / "learn.log"
    log.write_text("old line\n")
    offset = cases.log_size(log)
    with open(log, "a") as fh:
        fh.write("Traceback (most recent call last):\n")
    assert log_text_since(log, offset) == "Traceback (most recent call last):\n"
    log.write_text("rotated\n")  # shorter than the offset: a new file
    assert log_text_since(log, offset) == "rotated\n"
    assert log_text_since(None, 0) == "" and log_text_since(tmp_path / "missing.log", 0) == ""


# --- the report ------------------------------------------------------------------------------------
def _try(name, held=True, chat=0.3, alone=0.2, skipped=None, detail="ok"):
    return CaseResult(name, held, detail, 1.5, 0.0, alone, chat, skipped)


def test_rows_count_tries_held_and_the_worst_small_chat_per_case():
    rows = case_rows(
        [
            _try("impossible_prompts", chat=0.4),
            _try("trickled_body"),
            _try("impossible_prompts", held=False, chat=11.0, detail="held up: 200 in 11.00s"),
            _try("huge_weight_version", held=False, skipped="no weight server"),
        ]
    )
    assert [r.name for r in rows] == ["impossible_prompts", "trickled_body", "huge_weight_version"]
    first = rows[0]
    assert (first.tries, first.held, first.worst_chat_s, first.ok) == (2, 1, 11.0, False)
    assert first.detail == "held up: 200 in 11.00s"  # the first failure, not the last try
    assert rows[2].skipped == 1 and rows[2].ok and rows[2].detail == "skipped: no weight server"
    assert not cases_held(rows) and cases_line(rows) == "cases held 2/3 (1 skipped)"
    assert cases_held(rows[1:]) and not cases_held(rows[2:])  # only skipped tries: nothing was checked
    table = case_table(rows).splitlines()
    assert table[2] == "| impossible_prompts | 2 | 1 | 0 | 11.00 (0.20) | 1.50 | 0/2 | NO | held up: 200 in 11.00s |"


def _late(name, late_tries=2, tries=3, held=False):
    """A try of `name` whose action held and whose small chats were late at `late_tries` of its `tries`."""
    result = _try(name, held=held, chat=12.0, detail="held up: 200 in 12.00s")
    result.late, result.tries_run, result.tries_late = not held, tries, late_tries
    return result


def test_fishers_test_finds_a_case_late_at_every_try_and_not_one_late_as_often_as_the_control():
    assert case_report.fisher_greater_p(4, 4, 0, 4) == pytest.approx(1 / 70)
    assert case_report.fisher_greater_p(1, 8, 1, 7) == pytest.approx(0.8)
    assert case_report.fisher_greater_p(0, 5, 3, 5) == 1.0  # never late: nothing to find
    assert case_report.fisher_greater_p(6, 6, 0, 0) == 1.0  # a control with no tries says nothing


def test_a_case_late_no_more_often_than_the_control_holds_and_one_late_at_every_try_does_not():
    control = [_try(CONTROL)] * 5 + [_late(CONTROL, 2, 3)]  # the control was late 2 of 8 tries
    background = [_try("trickled_body")] * 5 + [_late("trickled_body", 2, 3)]  # as often as the control
    holding_up = [_late("impossible_prompts", 2, 2)] * 6  # late at each of its 12 tries
    rows = {r.name: r for r in case_rows(control + background + holding_up)}
    assert rows[CONTROL].ok and (rows[CONTROL].tries_late, rows[CONTROL].tries_run) == (2, 8)
    assert (
        rows["trickled_body"].ok
        and rows["trickled_body"].held == 5
        and rows["trickled_body"].late_p == pytest.approx(0.7154, abs=1e-4)
    )
    assert not rows["impossible_prompts"].ok and rows["impossible_prompts"].late_p < 0.001
    assert not cases_held(list(rows.values()))
    assert cases_held([rows[CONTROL], rows["trickled_body"]])
    line = cases_line([rows[CONTROL], rows["trickled_body"]])
    assert line == "cases held 5/6 (1 case late no more often than the control); control late 2/8 tries"
    assert "| 2/8 (0.72) | yes |" in case_table([rows["trickled_body"]])  # p = 0.715: as often as the control


def test_a_failure_other_than_lateness_is_never_weighed_against_the_control():
    control = [_late(CONTROL, 3, 3)] * 3  # late at every try
    failed = [_try("foreign_host", held=False, detail="200 in 0.01s")]
    rows = {r.name: r for r in case_rows(control + failed)}
    assert not rows["foreign_host"].ok
    late_alone = case_rows([_late("trickled_body", 2, 3)])  # no control ran: a late try fails its case
    assert not late_alone[0].ok and late_alone[0].late_p is None
    alone_failed = _try(CONTROL, held=False, detail="the small chat alone failed: 503")
    assert not case_rows([alone_failed])[0].ok  # the control's own small chat alone failed: serve failed a chat


def test_a_retried_case_counts_each_try_and_its_late_ones(monkeypatch):
    _fake_chats(monkeypatch, [2.5, 13.1, 2.5] + [2.5, 3.1, 2.5] + [2.5, 14.0, 2.5])
    result = run_case(Case("trickled_body", lambda t: Seen(True, "408")), TARGET)
    assert (result.tries_run, result.tries_late, result.late, result.held) == (3, 2, True, False)
    _fake_chats(monkeypatch, [2.5, 13.1, 2.5] + [2.5, 3.1, 2.5] * 2)
    result = run_case(Case("trickled_body", lambda t: Seen(True, "408")), TARGET)
    assert (result.tries_run, result.tries_late, result.late, result.held) == (3, 1, False, True)


def test_each_round_turns_the_cases_order_by_one(monkeypatch):
    monkeypatch.setattr(cases, "run_case", lambda case, t, t0=None: CaseResult(case.name, True, "", 0.0))
    names = [c.name for c in cases.CASES]
    assert [r.name for r in cases.run_round(TARGET)] == names
    assert [r.name for r in cases.run_round(TARGET, turn=1)] == names[1:] + names[:1]
    assert [r.name for r in cases.run_round(TARGET, turn=len(names) + 2)] == names[2:] + names[:2]
    assert names[0] == CONTROL


def test_the_verdict_fails_on_a_case_not_held_and_when_planned_cases_never_ran():
    samples = _samples(lambda t: 2000, lambda t: 40)
    held = _clean(samples, cases=[_try("foreign_host"), _try("trickled_body")])
    passed, line = verdict(held)
    assert passed and line.endswith("cases held 2/2")
    failed = _clean(samples, cases=[_try("foreign_host", held=False, detail="200 in 0.01s")])
    assert verdict(failed)[1].startswith("FAIL (hostile cases held)")
    assert not verdict(_clean(samples, cases=[]))[0]  # planned, none ran
    unplanned = _clean(samples)  # --cases-every-minutes 0: no criterion
    assert unplanned.cases is None and verdict(unplanned)[0] and "cases held" not in verdict(unplanned)[1]


def test_write_puts_the_case_table_in_results(tmp_path):
    samples = _samples(lambda t: 2000, lambda t: 40)
    s = _clean(samples, cases=[_try("foreign_host", held=False, detail="200 in 0.01s")])
    write(tmp_path, s, {"command": "slca bench soak"}, samples, [])
    md = (tmp_path / "results.md").read_text()
    assert md.startswith("FAIL (hostile cases held)") and "| foreign_host | 1 | 0 | 0 |" in md
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["cases"][0]["name"] == "foreign_host" and data["cases"][0]["ok"] is False


# --- against a real server -------------------------------------------------------------------------
KNOWN = {
    "empty_arrays": pytest.mark.xfail(
        reason="issue 36 (admission after parsing): six legal 1 MB bodies of empty arrays, parsed and checked in "
        "the request pool, held a 0.06 s small chat for 5.1 s on the loaded 2-core machine",
        strict=False,
    )
}
"""Cases today's server does not hold (the soak reports them as not held)."""


@pytest.fixture(scope="module")
def live(tiny_model_dir, tmp_path_factory):
    """`slca serve` on the tiny model (hf engine; short bounds: a 2 s body-read deadline, 3 s grammar builds) and
    the learner's weight server on loopback, its log in a file (what `slca up` keeps as logs/learn.log)."""
    from slca.redis_server import RedisServer
    from slca.weights import HttpTransport, fetch_token
    from tests.support.serve import ServerProcess

    tmp = tmp_path_factory.mktemp("soak-cases")
    (tmp / "weights").mkdir()
    handler, logger = logging.FileHandler(tmp / "learn.log"), logging.getLogger("slca.weights")
    logger.addHandler(handler)
    redis = RedisServer(tmp / "redis", appendonly=False).start()
    weights = HttpTransport(tmp / "weights", bind="127.0.0.1:0", key="k")
    server = ServerProcess(
        redis.url,
        tiny_model_dir,
        tmp / "server.log",
        "weights.follow=false",
        "serve.max_model_len=2048",  # the nested-repeats tool templates to ~1,300 tokens
        "serve.body_read_timeout_s=2",
        "serve.grammar_compile_timeout_s=3",
    )
    try:
        weights.connect()
        server.wait_ready()
        yield Target(server.url, None, 2.0, 3.0, weights.base_url, fetch_token("k"), tmp / "learn.log")
    finally:
        server.stop()
        weights.close()
        redis.kill()
        logger.removeHandler(handler)
        handler.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(c.name, marks=KNOWN.get(c.name, ())) for c in cases.CASES])
def test_each_case_holds_against_a_real_server(live, name):
    """Each case as the soak runs it, the small chat timed beside it (≈ 25 s for all of them, niced)."""
    result = run_case(next(c for c in cases.CASES if c.name == name), live)
    assert result.skipped is None and result.chat_worst_s is not None
    assert result.held, result.detail


def test_a_case_whose_server_refuses_the_connection_is_not_held_and_raises_nothing():
    """The fresh-clone soak's case runner died on a refused connection while serve restarted."""
    import socket

    from ops.bench.soak import cases

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = cases.Target(f"http://127.0.0.1:{port}")
    result = cases.run_case(
        cases.Case("refused", lambda t: cases.trickle(t.url, "/v1/chat/completions", b"{}", 1)[0]), target
    )
    assert not result.held and "ConnectionRefusedError" in result.detail
