"""Smoke runs of the serve entry points: a clear error for a bad model (`slca bench serve`: tests/ops/bench/)."""

from __future__ import annotations

from slca.cli import main


def test_serve_with_a_missing_model_is_a_clear_error(tmp_path, capsys):
    assert main(["--set", f"common.model={tmp_path / 'none'}", "serve"]) == 2
    assert "model directory not found" in capsys.readouterr().err
