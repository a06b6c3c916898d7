"""`slca sim fidelity` smoke run: the table is printed and its figures are measured, not constant."""

from __future__ import annotations

import json

from slca.cli import main as slca_main


def test_fidelity_smoke(tmp_path, capsys):
    out = tmp_path / "fid.json"
    assert (
        slca_main(["sim", "fidelity", "--domain", "retail", "--backend", "schema", "--limit", "2", "--json", str(out)])
        == 0
    )
    table = capsys.readouterr().out
    assert "SGLS fidelity" in table and "key-field agreement" in table
    summary = json.loads(out.read_text())
    assert summary["calls"] > 0 and summary["invalid_calls"] > 0
    assert summary["sim_schema_valid"] == 1.0 and summary["real_schema_valid"] == 1.0
    # Missing arguments and wrong types fail on both sides; unknown ids fail only on the real API.
    assert 0.0 < summary["error_agreement_invalid"] < 1.0
