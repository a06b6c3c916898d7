"""The two version roles on the dashboard and in `slca status`: `api/stats` carries the promoted and candidate
versions, the promotion record, the gate's decisions (time, candidate, promoted, outcome, difference with its
interval) and the scored-success rollbacks, and charts the promoted version's success over time against the
candidate's (on the gate set and on scored traffic); `slca status` prints the last decision and the rollback."""

from __future__ import annotations

import json
import re

import redis

from ops.observe.dashboard.version_series import scored_success
from ops.observe.version_view import VersionView
from ops.run.gate.status import gate_lines
from slca.contracts import Streams
from slca.contracts.stats import RewardStats
from slca.contracts.versions import (
    GateDecision,
    Promotion,
    SuccessRollback,
    gate_decisions_key,
    promotion_key,
    rollback_decisions_key,
)
from tests.ops.observe.dashboard.test_app import call

HOLD = GateDecision(
    candidate=4, promoted=0, outcome="hold", why="lower bound -0.300 <= -0.050", n=96, candidate_success=0.3,
    promoted_success=0.6, diff=-0.3, ci_low=-0.42, ci_high=-0.18, at=1100.0,
)  # fmt: skip
PROMOTE = GateDecision(
    candidate=8, promoted=0, outcome="promote", why="lower bound +0.010 > -0.050", n=96, candidate_success=0.7,
    promoted_success=0.6, diff=0.1, ci_low=0.01, ci_high=0.19, at=1200.0,
)  # fmt: skip
ROLLBACK = SuccessRollback(
    version=8, previous=0, why="upper bound -0.300 < -0.100", n=150, previous_n=150, success=0.35,
    previous_success=0.8, diff=-0.45, ci_high=-0.36, margin=0.1, at=1300.0,
)  # fmt: skip
RECORD = Promotion(promoted=0, history=[], rolled_back=[8], reason="auto-rollback", at=1300.0)


def write_roles(client: redis.Redis, prefix: str = "slca") -> None:
    streams = Streams(prefix)
    client.set(promotion_key(streams), RECORD.model_dump_json())
    for d in (HOLD, PROMOTE):
        client.rpush(gate_decisions_key(streams), d.model_dump_json())
    client.rpush(rollback_decisions_key(streams), ROLLBACK.model_dump_json())
    client.set(streams.weights_latest, json.dumps({"version": 9}))  # the learner's newest: the candidate
    rows = [(1050.0, 0, 1.0), (1150.0, 4, 0.0), (1250.0, 8, 1.0), (1260.0, 9, 0.0), (1350.0, 0, 1.0)]
    for ts, version, success in rows:
        client.xadd(streams.stats(RewardStats.STREAM),
                    RewardStats(exec=success, success=success, policy_version=version, ts=ts).to_fields())  # fmt: skip


def test_stats_carry_both_roles_every_decision_and_the_rollback(redis_url, redis_client):
    write_roles(redis_client)
    ((code, _, body),) = call(redis_url, ("/dashboard/api/stats", {}))
    assert code == 200
    data = json.loads(body)
    roles = data["versions"]
    assert roles["promoted"] == 0 and roles["candidate"] == 9
    assert roles["record"]["rolled_back"] == [8] and roles["record"]["reason"] == "auto-rollback"
    last = roles["decisions"][-1]
    assert [d["outcome"] for d in roles["decisions"]] == ["hold", "promote"]
    assert (last["at"], last["candidate"], last["promoted"], last["diff"], last["ci_low"], last["ci_high"]) == (
        1200.0, 8, 0, 0.1, 0.01, 0.19)  # fmt: skip
    (rollback,) = roles["rollbacks"]
    assert (rollback["version"], rollback["previous"], rollback["diff"], rollback["ci_high"]) == (8, 0, -0.45, -0.36)
    gate = data["charts"]["gate"]
    assert gate["x"] == [1100.0, 1200.0]
    assert gate["ys"] == {"promoted success": [0.6, 0.6], "candidate success": [0.3, 0.7]}
    assert gate["extra"]["outcome"] == ["hold", "promote"] and gate["extra"]["ci_low"] == [-0.42, 0.01]
    by_role = data["charts"]["scored_success"]
    assert by_role["x"] == [1050.0, 1150.0, 1250.0, 1260.0, 1350.0]
    promoted, candidate = by_role["ys"]["promoted (mean of 20)"], by_role["ys"]["candidate (mean of 20)"]
    # v0 promoted until 1200, v8 from the promotion to the rollback at 1300, v0 again after it
    assert promoted == [1.0, None, 1.0, None, 1.0] and candidate == [None, 0.0, None, 0.0, None]


def test_stats_without_roles_carry_empty_decisions(redis_url):
    ((code, _, body),) = call(redis_url, ("/dashboard/api/stats", {}))
    data = json.loads(body)
    assert code == 200 and data["versions"]["promoted"] is None and data["versions"]["decisions"] == []
    assert data["charts"]["gate"]["x"] == [] and data["charts"]["scored_success"]["x"] == []


def test_scored_success_without_any_change_uses_the_promoted_version():
    rows = [{"ts": 1.0, "policy_version": 3, "success": 1.0}, {"ts": 2.0, "policy_version": 5, "success": 0.0}]
    s = scored_success(rows, VersionView(promoted=3))
    assert s.ys["promoted (mean of 20)"] == [1.0, None] and s.ys["candidate (mean of 20)"] == [None, 0.0]


def test_status_prints_the_last_decision_and_the_rollback(redis_client):
    write_roles(redis_client, "statusroles")
    text = gate_lines(redis_client, "statusroles")
    assert "promotion record: promoted v0 (auto-rollback," in text and "rolled back: [8]" in text
    assert "v8 vs v0: promote — diff +0.100 [+0.010, +0.190], n 96" in text.splitlines()[-2]
    assert "v8 → v0 on scored success: rollback — 0.350 (n 150) vs 0.800 (n 150), diff -0.450" in text
    assert "one-sided 95% bound -0.360 (margin 0.10)" in text
    assert "the training feed is held" not in text


def test_status_says_while_the_gate_holds_the_feed(redis_client):
    from slca.contracts.versions import gate_feed_hold_key

    key = gate_feed_hold_key(Streams("statushold"))
    redis_client.set(key, json.dumps({"candidate": 12, "promoted": 3, "at": 1.0e9}), px=600_000)
    text = gate_lines(redis_client, "statushold")
    line = next(x for x in text.splitlines() if "judging" in x)
    held = re.search(r"the training feed is held \((.+), (\d+) s left at most\)$", line)
    assert line.startswith("gate: judging v12 vs v3 since ") and held and held[1] == key and 590 <= int(held[2]) <= 600


def test_the_page_shows_both_roles_the_decisions_table_and_the_two_charts():
    from tests.ops.observe.dashboard.test_replicas_stats import STATIC

    html, js = (STATIC / "index.html").read_text(), (STATIC / "dashboard.js").read_text()
    assert 'id="promoted"' in html and 'id="candidate"' in html and 'id="gate"' in html
    assert 'id="chart-gate"' in html and 'id="chart-roles"' in html
    assert 'key: "gate"' in js and 'key: "scored_success"' in js  # the series api/stats carries
    assert "renderRoles(data.versions)" in js and "td.textContent = text" in js  # rows drawn as text, never markup
