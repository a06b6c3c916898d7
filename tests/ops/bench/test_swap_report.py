"""`slca bench swap` arithmetic: swap latency from announcements and served versions, failures, mixed share."""

from __future__ import annotations

import json

import pytest

from ops.bench.swap_report import Published, Response, summarise, swap_latencies, write


def test_latency_is_announcement_to_first_response_showing_that_version_or_a_later_one():
    published = [Published(1, 10.0, 1.5), Published(2, 20.0, 1.7), Published(3, 30.0, 1.6)]
    responses = [
        Response("canary", 10.5, True, 0),  # still the old version
        Response("canary", 10.8, True, 1),  # v1 shows 0.8 s after its announcement
        Response("agent", 11.0, True, 1, mixed=True),
        Response("agent", 21.0, False, error="HTTP 503: engine unavailable"),
        Response("agent", 23.0, True, 3),  # v2 was never seen alone: v3 (announced later) proves it was loaded
        Response("canary", 31.0, True, 3),
    ]
    assert swap_latencies(published, responses) == pytest.approx([0.8, 3.0, 1.0])
    s = summarise(published, responses)
    assert (s.versions, s.swaps_seen, s.requests, s.failed, s.trajectories, s.mixed) == (3, 3, 6, 1, 2, 1)
    assert s.mixed_share == 0.5 and s.latency_p50_s == 1.0 and s.latency_p99_s == 3.0
    assert s.first_error == "HTTP 503: engine unavailable" and s.publish_p50_s == 1.6


def test_a_version_never_served_is_missing_not_zero(tmp_path):
    published = [Published(1, 10.0, 1.0)]
    s = summarise(published, [Response("canary", 12.0, True, 0)])
    assert swap_latencies(published, []) == [None] and s.swaps_seen == 0 and s.latency_p50_s is None
    write(tmp_path, s, {"command": "slca bench swap"}, ["note"])
    assert json.loads((tmp_path / "results.json").read_text())["swaps_seen"] == 0
    assert "| 1 | 0 | — |" in (tmp_path / "table.md").read_text()
