"""The dashboard's `api/stats` carries every serve replica's status (served version, heartbeat age, stale flag),
read by the same `slca.replicas` reader as `slca status`; the page draws them in its replicas table."""

from __future__ import annotations

import json
from pathlib import Path

from slca.contracts import Streams
from tests.ops.observe.dashboard.test_app import call
from tests.slca.test_replicas import status, write

STATIC = Path(__file__).resolve().parents[4] / "ops" / "observe" / "dashboard" / "static"


def test_stats_list_every_replica_with_its_version_and_staleness(redis_url, redis_client):
    replicas = (status("serve-a:8000", 5), status("serve-b:8000", 4, last_swap="refused", last_swap_version=9))
    write(redis_url, *replicas, prefix="slca")  # the prefix the sub-app is made with here
    redis_client.pexpire(Streams("slca").replica("serve-b:8000"), 20_000)  # written 40 s ago
    ((code, _, body),) = call(redis_url, ("/dashboard/api/stats", {}))
    data = json.loads(body)
    assert code == 200
    rows = {r["replica"]: r for r in data["replicas"]}
    assert rows["serve-a:8000"]["policy_version"] == 5 and rows["serve-a:8000"]["stale"] is False
    assert rows["serve-b:8000"]["policy_version"] == 4 and rows["serve-b:8000"]["stale"] is True
    assert rows["serve-b:8000"]["last_swap"] == "refused" and rows["serve-b:8000"]["age_s"] >= 39


def test_stats_without_replicas_carry_an_empty_list(redis_url):
    ((code, _, body),) = call(redis_url, ("/dashboard/api/stats", {}))
    assert code == 200 and json.loads(body)["replicas"] == []


def test_the_page_has_the_replicas_table_and_draws_rows_as_text():
    html, js = (STATIC / "index.html").read_text(), (STATIC / "dashboard.js").read_text()
    assert 'id="replicas"' in html and "<tbody>" in html
    assert "renderReplicas(data.replicas" in js and "td.textContent = text" in js
