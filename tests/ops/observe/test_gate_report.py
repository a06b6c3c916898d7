"""The gate's part of `slca bench online`: every decision of `<data_dir>/gate/` with its figures, the per-item files
of the versions it judged, the rollbacks, and the gate's share of the serving time."""

import json

from ops.observe.gate_report import gate_lines, gate_markdown, gate_summary
from slca.contracts.versions import GateDecision


def decision(candidate: int, promoted: int, outcome: str, at: float, **figures) -> str:
    return GateDecision(
        candidate=candidate, promoted=promoted, outcome=outcome, why="rule", at=at, **figures
    ).model_dump_json()


def test_every_decision_its_items_and_the_cost_are_carried(tmp_path):
    gate = tmp_path / "var" / "gate"
    (gate / "items").mkdir(parents=True)
    figures = dict(n=96, candidate_success=0.40, promoted_success=0.50, diff=-0.10, ci_low=-0.17, ci_high=-0.03,
                   candidate_only=2, promoted_only=12, mcnemar_p=0.01, seconds=180.0)  # fmt: skip
    (gate / "decisions.jsonl").write_text(
        decision(40, 1, "hold", 1000.0 + 1800, **figures) + "\n" + decision(80, 1, "skip", 1000.0 + 3600) + "\n"
    )
    for v in (1, 40, 80, 7):  # v7 was judged by nothing recorded here: not copied
        (gate / "items" / f"v{v}.jsonl").write_text('{"item_id": "a"}\n')
    out = tmp_path / "bench"
    summary = gate_summary(tmp_path / "var", out, serving_began=1000.0, serving_s=3600.0)
    assert [d["minute"] for d in summary["decisions"]] == [30.0, 60.0]
    assert summary["outcomes"] == {"hold": 1, "skip": 1} and summary["evaluation_s"] == 180.0
    assert summary["share_of_serving"] == 0.05 and summary["files"] == "gate/"
    assert sorted(p.name for p in (out / "gate" / "items").iterdir()) == ["v1.jsonl", "v40.jsonl", "v80.jsonl"]
    assert (out / "gate" / "decisions.jsonl").read_text().count("\n") == 2
    table = "\n".join(gate_markdown(summary))
    assert "| 30.0 | v40 | v1 | hold | 96 | 50.0 | 40.0 | -10.0 [-17.0, -3.0] | +2/−12 | 0.010 | 180 |" in table
    assert "5.0% of the serving time" in table
    assert "v40 vs v1: hold diff -0.100" in gate_lines(summary)
    json.dumps(summary)  # results.json takes it as it is


def test_a_run_without_a_gate_says_so(tmp_path):
    summary = gate_summary(tmp_path / "var", tmp_path / "bench", serving_began=None, serving_s=None)
    assert summary["decisions"] == [] and summary["files"] is None and not (tmp_path / "bench").exists()
    assert "No gate decision in this run." in gate_markdown(summary)
    assert gate_lines(summary) == "gate: no decision in this run"
