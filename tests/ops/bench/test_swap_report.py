"""`slca bench swap` arithmetic: swap latency from announcements and served versions, failures, mixed share."""

from __future__ import annotations

import json

import pytest

from ops.bench.ab import MachinePathError
from ops.bench.swap.report import (
    Published,
    Response,
    mixed_per_swap,
    rss_growth,
    server_swap_outcomes,
    summarise,
    swap_latencies,
    table,
    write,
)


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
    assert "| 1 | 0 | 1 | — |" in (tmp_path / "table.md").read_text() and s.failed_swaps == 1


def test_end_to_end_latency_starts_when_the_publish_began():
    published = [Published(1, 10.0, 1.5, started_at=8.0), Published(2, 20.0, 2.0)]  # v2: began = 20 − 2
    responses = [Response("canary", 10.5, True, 1), Response("canary", 21.0, True, 2)]
    s = summarise(published, responses)
    assert s.latencies_s == pytest.approx([0.5, 1.0])
    assert (s.end_to_end_p50_s, s.end_to_end_max_s) == pytest.approx((2.5, 3.0))  # 10.5 − 8, 21 − 18
    assert s.failed_swaps == 0


def test_failed_swaps_and_mixed_runs_per_swap_are_counted():
    published = [Published(1, 10.0, 1.0), Published(2, 20.0, 1.0), Published(3, 30.0, 1.0)]
    responses = [
        Response("agent", 12.0, True, 1, mixed=True),
        Response("agent", 15.0, True, 1, mixed=True),
        Response("agent", 25.0, True, 1, mixed=False),
        Response("agent", 31.0, True, 1, mixed=True),
        Response("agent", 9.0, True, 0, mixed=True),  # before any swap: no swap's
        Response("agent", 32.0, False, error="HTTP 500"),
    ]
    assert mixed_per_swap(published, responses) == [2, 0, 1]
    s = summarise(published, responses, {"ok": 1, "failed": 2, "rollbacks": 2})
    assert s.swaps_seen == 1 and s.failed_swaps == 2 and s.failed == 1
    assert s.mixed_per_swap == [2, 0, 1] and s.mixed_per_swap_mean == 1.0 and s.mixed_per_swap_max == 2
    assert s.server_swaps == {"ok": 1, "failed": 2, "rollbacks": 2}


def test_server_swap_outcomes_are_read_from_metrics_text():
    text = """# HELP slca_swaps_total Weight swaps
# TYPE slca_swaps_total counter
slca_swaps_total{outcome="ok"} 19.0
slca_swaps_total{outcome="failed"} 1.0
slca_swaps_created{outcome="ok"} 1.7e9
slca_swap_rollbacks_total 1.0
slca_swap_seconds_sum 4.2"""
    assert server_swap_outcomes(text) == {"ok": 19, "failed": 1, "rollbacks": 1}
    assert server_swap_outcomes("") == {}


def test_write_refuses_a_machine_path_in_the_header(tmp_path):
    s = summarise([Published(1, 10.0, 1.0)], [Response("canary", 11.0, True, 1)])
    with pytest.raises(MachinePathError):
        write(tmp_path / "out", s, {"command": "slca bench swap", "model": "/home/me/models/m"}, [])
    assert not (tmp_path / "out").exists()


def test_fewer_than_twenty_versions_are_refused():
    import argparse

    from ops.bench.swap.main import MIN_VERSIONS, run_bench_swap
    from slca.cli import CliError

    assert MIN_VERSIONS == 20
    with pytest.raises(CliError, match="at least 20"):
        run_bench_swap(argparse.Namespace(versions=5), config=None)


def test_serve_rss_through_the_swaps_is_reported_first_to_last_with_its_max():
    s = summarise(
        [Published(1, 10.0, 1.0)], [Response("canary", 11.0, True, 1)], serve_rss_mib=[2000.04, 2600.0, 2300.0]
    )
    assert s.serve_rss_mib == [2000.0, 2600.0, 2300.0]
    assert rss_growth(s.serve_rss_mib) == (300.0, 2600.0)
    assert "2000 → 2300 (max 2600)" in table(s)
    assert rss_growth([2000.0]) is None and rss_growth(None) is None
    assert table(summarise([Published(1, 10.0, 1.0)], [])).rstrip().endswith("| — |")


def test_end_to_end_starts_after_the_bench_perturbs_the_weights_and_both_figures_are_reported():
    published = [Published(1, 10.0, 1.5, started_at=8.5, perturb_s=6.0), Published(2, 20.0, 2.0, perturb_s=5.0)]
    responses = [Response("canary", 10.5, True, 1), Response("canary", 21.0, True, 2)]
    s = summarise(published, responses)
    assert (s.end_to_end_p50_s, s.end_to_end_max_s) == pytest.approx((2.0, 3.0))  # 10.5 − 8.5, 21 − 18
    assert (s.perturb_to_token_p50_s, s.perturb_to_token_max_s) == pytest.approx((8.0, 8.0))  # + 6, + 5
    assert s.perturb_p50_s == pytest.approx(5.0)
    assert "| 2.00 | 3.00 | 5.00 | 8.00 |" in table(s)


def test_the_publisher_starts_the_publish_clock_after_its_perturbation(monkeypatch):
    """The bench's perturbation (≈ 6 s on the real model) is timed apart, not inside publish → first token."""
    import types

    import slca.weights
    from ops.bench.swap import main as swap

    clock = [100.0]
    monkeypatch.setattr(swap, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))

    def fake_publish(model, model_dir, weights_dir, last, version, name, client, streams, keep):
        clock[0] += 2.0  # write, hash, announce
        return types.SimpleNamespace(version=version), 2.0

    monkeypatch.setattr(slca.weights, "publish", fake_publish)
    publisher = swap.Publisher.__new__(swap.Publisher)
    publisher.model_dir, publisher.weights_dir, publisher.client, publisher.streams = swap.Path("m"), None, None, None
    publisher.last, publisher.model = 0, None
    monkeypatch.setattr(publisher, "perturb", lambda: clock.__setitem__(0, clock[0] + 6.0))
    p = publisher.publish_next()
    assert (p.version, p.perturb_s, p.began, p.announced_at) == (1, 6.0, 106.0, 108.0)
