"""The Grafana dashboard and the Prometheus config: every queried metric is one a process exposes.

The full check against every live process runs in tests/ops/run/supervisor/test_up_integration.py (one bring-up for
both); here: the parser, the dashboard's coverage of the agreed metric names, and a live `slca feed` /metrics.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ops.observe.metrics_check import exposed_series, load_dashboard, missing_metrics, queried_metrics
from ops.observe.scrape import scrape
from slca.redis_server import free_port

REPO = Path(__file__).resolve().parents[3]

# the metric names agreed between the components (docs/design.md#metrics), as families
AGREED = """slca_requests_total slca_request_seconds slca_tokens_generated_total slca_tool_calls_total slca_tool_turns
slca_policy_version slca_swap_seconds slca_swaps_total slca_trajectories_recorded_total slca_backpressure_total
slca_engine_failures_total slca_sim_calls_total slca_sim_faults_total slca_sim_call_seconds
slca_sim_validation_failures_total slca_sim_cache_hits_total slca_scored_total slca_score_seconds slca_reward_exec
slca_reward_pref slca_reward_component slca_queue_depth slca_queue_lag_seconds slca_redeliveries_total
slca_orphans_requeued_total
slca_dead_letters_total slca_groups_emitted_total slca_late_members_total slca_learner_steps_total
slca_learner_step_seconds slca_learner_tokens_per_second slca_learner_loss slca_learner_kl slca_learner_clip_fraction
slca_advantage_abs_mean slca_zero_variance_groups_total slca_staleness slca_stale_groups_dropped_total
slca_published_version slca_publish_seconds slca_weights_fetch_bytes_total slca_weights_fetch_seconds
slca_weights_fetch_failures_total slca_weights_fetch_versions_total""".split()

PAGE = """# HELP slca_scored_total Trajectories scored
# TYPE slca_scored_total counter
# HELP slca_score_seconds Scoring time
# TYPE slca_score_seconds histogram
slca_score_seconds_bucket{le="+Inf"} 0.0
slca_score_seconds_count 0.0
slca_score_seconds_sum 0.0
# TYPE slca_queue_depth gauge
slca_queue_depth{stream="slca:groups"} 3.0
"""


def test_parser_expands_families_into_series():
    series = exposed_series(PAGE)
    assert {
        "slca_scored_total",
        "slca_score_seconds_bucket",
        "slca_score_seconds_sum",
        "slca_score_seconds_count",
        "slca_queue_depth",
    } <= series
    assert "slca_scored" not in series and "slca_score_seconds" not in series


def test_queried_names_are_found_in_exprs():
    dash = {"panels": [{"targets": [{"expr": 'sum(rate(slca_a_total[1m])) / max by (stream) (slca_b{x="slca_c"})'}]}]}
    assert queried_metrics(dash) == {"slca_a_total", "slca_b", "slca_c"}
    assert missing_metrics(dash, ["# TYPE slca_a_total counter\n# TYPE slca_b gauge\n"]) == {"slca_c"}


def test_dashboard_queries_only_agreed_or_feed_metrics_and_covers_each_agreed_one():
    queried = queried_metrics(load_dashboard())
    families = {q.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count") for q in queried}
    feed = {f for f in families if f.startswith("slca_feed_")}
    assert families - feed <= set(AGREED), families - feed - set(AGREED)
    assert set(AGREED) - families == set(), "agreed metrics without a panel"


def test_dashboard_is_grafana_shaped():
    dash = load_dashboard()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and dash["uid"] and dash["templating"]["list"][0]["type"] == "datasource"
    for panel in dash["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and all(t["expr"].count("(") == t["expr"].count(")") for t in panel["targets"])


def test_prometheus_config_scrapes_the_default_ports():
    yaml = pytest.importorskip("yaml")
    from ops.settings import OpsSettings

    cfg = yaml.safe_load((REPO / "ops" / "observe" / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"][0] for job in cfg["scrape_configs"]}
    ports = OpsSettings().metrics_ports
    assert targets["slca-worker"].endswith(f":{ports['worker']}") and targets["slca-feed"].endswith(f":{ports['feed']}")
    assert targets["slca-learner"].endswith(f":{ports['learn']}")
    assert targets["slca-assembler"].endswith(f":{ports['assembler']}")


@pytest.mark.timed
def test_feed_metrics_live(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "SLCA_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slca",
            "--set",
            f'ops.metrics_ports={{"feed": {port}}}',
            "feed",
            "--url",
            f"http://127.0.0.1:{free_port()}",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import time

        deadline, text = time.monotonic() + 30, None
        while time.monotonic() < deadline and not (text and "slca_feed_retries_total" in text):
            text = scrape(f"http://127.0.0.1:{port}/metrics", 0.5)
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    feed_queries = {q for q in queried_metrics(load_dashboard()) if q.startswith("slca_feed_")}
    assert text and feed_queries and not (feed_queries - exposed_series(text))
    assert proc.returncode == 0
