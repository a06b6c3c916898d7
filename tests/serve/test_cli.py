"""Smoke runs of the serve entry points: `slca bench serve` (tiny, hf) and a clear error for a bad model."""

from __future__ import annotations

import re

from slca.cli import main


def test_bench_serve_prints_ratios(tiny_model_dir, serve_redis, capsys):
    rc = main(["--set", f"common.model={tiny_model_dir}", "--set", f"common.redis_url={serve_redis.url}",
               "--set", "serve.torch_threads=1", "bench", "serve", "--engine", "hf", "--requests", "2",
               "--max-tokens", "4", "--sequential"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    rows = re.findall(r"^(raw engine|/v1/\S+)[^\n]*?\s(\d+)\s+\S+\s+\S+\s+(\d+\.\d\d)$", out, re.M)
    assert [r[0] for r in rows] == ["raw engine", "/v1/agent/runs", "/v1/chat/completions", "raw engine",
                                    "/v1/chat/completions"]  # fmt: skip
    assert rows[0][2] == "1.00" and all(int(r[1]) == 8 for r in rows)


def test_serve_with_a_missing_model_is_a_clear_error(tmp_path, capsys):
    assert main(["--set", f"common.model={tmp_path / 'none'}", "serve"]) == 2
    assert "model directory not found" in capsys.readouterr().err
