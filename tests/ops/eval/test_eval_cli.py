"""`slca eval` end to end on the tiny model: table printed, JSON written, every category scored."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_eval_smoke_on_tiny_model(tiny_model_dir, tmp_path):
    out = tmp_path / "eval.json"
    proc = subprocess.run(
        [sys.executable, "-m", "slca", "eval", "--model", str(tiny_model_dir), "--limit", "2", "--max-tokens", "12",
         "--out", str(out)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["bfcl"]["categories"]) == {"simple_python", "multiple", "parallel", "parallel_multiple",
                                                 "irrelevance"}  # fmt: skip
    assert all(v["n"] == 2 for v in result["bfcl"]["categories"].values())
    assert result["indomain"]["summary"]["n"] == 2
    assert "BFCL (official ast_checker)" in proc.stdout and "argument match" in proc.stdout


def test_eval_rejects_a_missing_model(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "slca", "eval", "--model", str(tmp_path / "nope")], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "no model at" in proc.stderr and "Traceback" not in proc.stderr
