"""The HTTP weight transport's counters (`slca_weights_fetch_*`, serve/metrics.py fed by the transport's observer):
a real fetch from a learner's HTTP server moves the bytes, the time histogram and `verified`; a reused local copy
moves no bytes and no time; a version whose bytes differ from the signed manifest counts as a `checksum` failure
and a `refused` version; a wrong token (`http_status`) and a learner that is down (`unreachable`) are failures but
refuse nothing. (The same counters through a live serve app: tests/serve/test_replicas.py.)"""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from serve.metrics import ServeMetrics
from slca.redis_server import free_port
from slca.weights import FETCH_FAILURES, WeightLoadError, for_server
from tests.support.weights import WEIGHTS_KEY, publish_version


def sample(metrics: ServeMetrics, series: str) -> float:
    """One sample of the registry's page (`name{labels}` exactly as exposed)."""
    page = generate_latest(metrics.registry).decode()
    match = re.search(rf"^{re.escape(series)} (\S+)$", page, re.M)
    assert match, f"{series} not on the page"
    return float(match.group(1))


def version_bytes(root) -> int:
    return sum(f.stat().st_size for f in root.iterdir() if f.is_file() and f.name != "manifest.json")


def test_fetch_counters_move_on_real_http_fetches(tiny_model_dir, tmp_path, learner_http):
    learner_dir = learner_http.weights_dir
    v1, v2 = (
        publish_version(
            tiny_model_dir, learner_dir, v, 1.0 + v / 20, url=learner_http.url_for(v), path=f"/nonexistent/v{v}"
        )
        for v in (1, 2)
    )
    with open(learner_dir / "v2" / "model.safetensors", "r+b") as fh:  # changed on the learner's host after signing
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    metrics = ServeMetrics(CollectorRegistry())
    # every reason and outcome is on the page from the start, at 0 (rate() needs the series before its first event)
    assert all(sample(metrics, f'slca_weights_fetch_failures_total{{reason="{r}"}}') == 0 for r in FETCH_FAILURES)
    server = for_server("auto", tmp_path / "mirror", WEIGHTS_KEY, timeout_s=10, observer=metrics.observe_fetch)

    server.fetch(v1)
    assert sample(metrics, "slca_weights_fetch_bytes_total") == version_bytes(learner_dir / "v1") > 0
    assert sample(metrics, "slca_weights_fetch_seconds_count") == 1
    assert sample(metrics, "slca_weights_fetch_seconds_sum") > 0
    assert sample(metrics, 'slca_weights_fetch_versions_total{outcome="verified"}') == 1

    server.fetch(v1)  # a copy of exactly this announcement is kept: verified again, nothing moved, nothing timed
    assert sample(metrics, "slca_weights_fetch_bytes_total") == version_bytes(learner_dir / "v1")
    assert sample(metrics, "slca_weights_fetch_seconds_count") == 1
    assert sample(metrics, 'slca_weights_fetch_versions_total{outcome="verified"}') == 2

    with pytest.raises(WeightLoadError, match="checksum mismatch"):
        server.fetch(v2)
    assert sample(metrics, 'slca_weights_fetch_failures_total{reason="checksum"}') == 1
    assert sample(metrics, 'slca_weights_fetch_versions_total{outcome="refused"}') == 1
    assert sample(metrics, "slca_weights_fetch_seconds_count") == 2  # a failed download is timed too
    assert sample(metrics, "slca_weights_fetch_bytes_total") > version_bytes(learner_dir / "v1")  # its bytes came

    wrong_key = for_server("http", tmp_path / "m2", "another key", timeout_s=10, observer=metrics.observe_fetch)
    with pytest.raises(WeightLoadError, match="403"):
        wrong_key.fetch(v1)
    assert sample(metrics, 'slca_weights_fetch_failures_total{reason="http_status"}') == 1

    gone = v1.model_copy(update={"url": f"http://127.0.0.1:{free_port()}/v1/"})  # nobody listens there
    with pytest.raises(WeightLoadError, match="cannot fetch"):
        for_server("http", tmp_path / "m3", WEIGHTS_KEY, timeout_s=5, observer=metrics.observe_fetch).fetch(gone)
    assert sample(metrics, 'slca_weights_fetch_failures_total{reason="unreachable"}') == 1
    # the network failing refuses no version: only what was sent can
    assert sample(metrics, 'slca_weights_fetch_versions_total{outcome="refused"}') == 1

    small = for_server(
        "http", tmp_path / "m4", WEIGHTS_KEY, timeout_s=10, max_bytes=100, observer=metrics.observe_fetch
    )
    with pytest.raises(WeightLoadError, match="larger than 100 bytes"):
        small.fetch(v1)
    assert sample(metrics, 'slca_weights_fetch_failures_total{reason="too_large"}') == 1
    assert sample(metrics, 'slca_weights_fetch_versions_total{outcome="refused"}') == 2
