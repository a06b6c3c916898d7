"""Writes `ops/observe/grafana/slca.json` (Grafana dashboard over the `slca_` metrics).
Run: python -m ops.observe.grafana.generate

Kept as code so that a panel is one line; the JSON is committed so Grafana users need nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

R = "[$__rate_interval]"

# (section, [(title, unit, [(legend, PromQL)])])
PANELS: list[tuple[str, list[tuple[str, str, list[tuple[str, str]]]]]] = [
    (
        "Rewards",
        [
            (
                "Execution / preference reward (mean)",
                "none",
                [
                    ("exec", f"sum(rate(slca_reward_exec_sum{R})) / sum(rate(slca_reward_exec_count{R}))"),
                    ("pref", f"sum(rate(slca_reward_pref_sum{R})) / sum(rate(slca_reward_pref_count{R}))"),
                ],
            ),
            (
                "Reward components (mean)",
                "none",
                [
                    (
                        "{{component}}",
                        f"sum by (component) (rate(slca_reward_component_sum{R})) / "
                        f"sum by (component) (rate(slca_reward_component_count{R}))",
                    )
                ],
            ),
            (
                "Tool turns per episode (mean)",
                "none",
                [("turns", f"sum(rate(slca_tool_turns_sum{R})) / sum(rate(slca_tool_turns_count{R}))")],
            ),
            ("Trajectories scored / s", "ops", [("scored", f"sum(rate(slca_scored_total{R}))")]),
        ],
    ),
    (
        "Serving",
        [
            (
                "Requests / s",
                "reqps",
                [("{{endpoint}} {{status}}", f"sum by (endpoint, status) (rate(slca_requests_total{R}))")],
            ),
            (
                "Request latency p50 / p95",
                "s",
                [
                    (
                        "p50 {{endpoint}}",
                        f"histogram_quantile(0.5, sum by (le, endpoint) (rate(slca_request_seconds_bucket{R})))",
                    ),
                    (
                        "p95 {{endpoint}}",
                        f"histogram_quantile(0.95, sum by (le, endpoint) (rate(slca_request_seconds_bucket{R})))",
                    ),
                ],
            ),
            ("Tokens generated / s", "none", [("tokens/s", f"sum(rate(slca_tokens_generated_total{R}))")]),
            (
                "Tool calls / s by outcome",
                "ops",
                [("{{tool}} {{outcome}}", f"sum by (tool, outcome) (rate(slca_tool_calls_total{R}))")],
            ),
            (
                "Policy version: served vs published",
                "none",
                [("served", "max(slca_policy_version)"), ("published", "max(slca_published_version)")],
            ),
            (
                "Weight swap latency (mean) and swaps",
                "s",
                [
                    ("swap s", f"sum(rate(slca_swap_seconds_sum{R})) / sum(rate(slca_swap_seconds_count{R}))"),
                    ("swaps {{outcome}}", "sum by (outcome) (slca_swaps_total)"),
                ],
            ),
            (
                "Recorded, back-pressure, failures",
                "none",
                [
                    ("recorded/s", f"sum(rate(slca_trajectories_recorded_total{R}))"),
                    ("backpressure/s", f"sum(rate(slca_backpressure_total{R}))"),
                    ("engine failures/s", f"sum(rate(slca_engine_failures_total{R}))"),
                ],
            ),
        ],
    ),
    (
        "Serve replicas and weight transport",
        [
            ("Served version per replica", "none", [("{{instance}}", "max by (instance) (slca_policy_version)")]),
            (
                "Weight fetch bytes / s (HTTP)",
                "Bps",
                [("{{instance}}", f"sum by (instance) (rate(slca_weights_fetch_bytes_total{R}))")],
            ),
            (
                "Weight fetch time p50 / p95",
                "s",
                [
                    ("p50", f"histogram_quantile(0.5, sum by (le) (rate(slca_weights_fetch_seconds_bucket{R})))"),
                    ("p95", f"histogram_quantile(0.95, sum by (le) (rate(slca_weights_fetch_seconds_bucket{R})))"),
                ],
            ),
            (
                "Weight fetch failures and versions",
                "none",
                [
                    ("failed {{reason}}", "sum by (reason) (slca_weights_fetch_failures_total)"),
                    ("versions {{outcome}}", "sum by (outcome) (slca_weights_fetch_versions_total)"),
                ],
            ),
        ],
    ),
    (
        "Simulator (SGLS)",
        [
            (
                "Simulated calls / s",
                "ops",
                [("{{tool}} {{backend}}", f"sum by (tool, backend) (rate(slca_sim_calls_total{R}))")],
            ),
            ("Injected faults / s", "ops", [("{{kind}}", f"sum by (kind) (rate(slca_sim_faults_total{R}))")]),
            (
                "Simulator latency p95",
                "s",
                [("p95", f"histogram_quantile(0.95, sum by (le) (rate(slca_sim_call_seconds_bucket{R})))")],
            ),
            (
                "Validation failures and cache hits / s",
                "ops",
                [
                    ("invalid args", f"sum(rate(slca_sim_validation_failures_total{R}))"),
                    ("cache hits", f"sum(rate(slca_sim_cache_hits_total{R}))"),
                ],
            ),
        ],
    ),
    (
        "Queues",
        [
            ("Queue depth", "none", [("{{stream}}", "max by (stream) (slca_queue_depth)")]),
            ("Queue lag", "s", [("{{stream}}", "max by (stream) (slca_queue_lag_seconds)")]),
            (
                "Redeliveries, dead letters, late members",
                "none",
                [
                    ("redeliveries", "sum(slca_redeliveries_total)"),
                    ("lost tasks enqueued again", "sum(slca_orphans_requeued_total)"),
                    ("dead letters", "sum(slca_dead_letters_total)"),
                    ("late members", "sum(slca_late_members_total)"),
                ],
            ),
            (
                "Groups emitted / s",
                "ops",
                [("partial={{partial}}", f"sum by (partial) (rate(slca_groups_emitted_total{R}))")],
            ),
            (
                "Scoring latency p95",
                "s",
                [("p95", f"histogram_quantile(0.95, sum by (le) (rate(slca_score_seconds_bucket{R})))")],
            ),
        ],
    ),
    (
        "Learner",
        [
            ("Loss", "none", [("loss", "slca_learner_loss")]),
            (
                "KL and clip fraction",
                "none",
                [("kl", "slca_learner_kl"), ("clip fraction", "slca_learner_clip_fraction")],
            ),
            (
                "Step time (mean) and steps",
                "s",
                [
                    (
                        "step s",
                        f"sum(rate(slca_learner_step_seconds_sum{R})) / sum(rate(slca_learner_step_seconds_count{R}))",
                    ),
                    ("steps", "sum(slca_learner_steps_total)"),
                ],
            ),
            ("Learner tokens / s", "none", [("tokens/s", "slca_learner_tokens_per_second")]),
            ("|advantage| by segment kind", "none", [("{{kind}}", "slca_advantage_abs_mean")]),
            (
                "Zero-variance groups by channel",
                "none",
                [("{{channel}}", "sum by (channel) (slca_zero_variance_groups_total)")],
            ),
            (
                "Staleness and dropped stale groups",
                "none",
                [("staleness", "slca_staleness"), ("dropped", "sum(slca_stale_groups_dropped_total)")],
            ),
            (
                "Publish time (mean)",
                "s",
                [("publish s", f"sum(rate(slca_publish_seconds_sum{R})) / sum(rate(slca_publish_seconds_count{R}))")],
            ),
        ],
    ),
    (
        "Task feed",
        [
            (
                "Feed requests / s by status",
                "reqps",
                [("{{status}}", f"sum by (status) (rate(slca_feed_requests_total{R}))")],
            ),
            (
                "Feed in flight, retries",
                "none",
                [
                    ("in flight", "sum(slca_feed_inflight)"),
                    ("retries {{reason}}", "sum by (reason) (slca_feed_retries_total)"),
                ],
            ),
            ("Feed trajectories / s", "ops", [("recorded", f"sum(rate(slca_feed_trajectories_total{R}))")]),
        ],
    ),
]


def build() -> dict:
    panels, y, pid = [], 0, 1
    for section, items in PANELS:
        panels.append(
            {
                "type": "row",
                "title": section,
                "id": pid,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        pid, y = pid + 1, y + 1
        for i, (title, unit, targets) in enumerate(items):
            panels.append(
                {
                    "type": "timeseries",
                    "title": title,
                    "id": pid,
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "gridPos": {"h": 8, "w": 8, "x": (i % 3) * 8, "y": y + (i // 3) * 8},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "targets": [
                        {
                            "refId": chr(65 + k),
                            "expr": expr,
                            "legendFormat": legend,
                            "datasource": {"type": "prometheus", "uid": "${datasource}"},
                        }
                        for k, (legend, expr) in enumerate(targets)
                    ],
                }
            )
            pid += 1
        y += 8 * ((len(items) + 2) // 3)
    return {
        "title": "slca — serving and online training",
        "uid": "slca-main",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "tags": ["slca"],
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]
        },
        "panels": panels,
    }


def main() -> None:
    out = Path(__file__).with_name("slca.json")
    out.write_text(json.dumps(build(), indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
