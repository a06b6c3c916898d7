"""The probes that once lived beside their results in bench/ (ops/bench/serve/*, ops/bench/weights/*) run as modules
of the package: `python -m ops.bench.<family>.<name>`."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from tests.support.processes import REPO

PROBES = [
    "ops.bench.serve.hf_decode_probe",
    "ops.bench.serve.omp_teams",
    "ops.bench.serve.omp_wait_policy",
    "ops.bench.serve.prefix_cache",
    "ops.bench.serve.shared_prefill",
    "ops.bench.weights.load_peak",
    "ops.bench.learner_growth",
]


@pytest.mark.parametrize("name", PROBES)
def test_a_probe_is_a_module_with_a_main(name):
    assert callable(importlib.import_module(name).main)


def test_the_hf_ab_scripts_share_their_helpers_by_package_import():
    """They imported `hf_ab` from their own folder on sys.path: run as modules that import fails."""
    for name in ("ops.bench.serve.prefix_cache", "ops.bench.serve.shared_prefill"):
        source = (REPO / (name.replace(".", "/") + ".py")).read_text()
        assert "from ops.bench.serve.hf_ab import" in source and "from hf_ab import" not in source


def test_omp_wait_policy_runs_its_sides_as_itself():
    module = importlib.import_module("ops.bench.serve.omp_wait_policy")
    assert module.ROLE_MODULE == module.__name__


def test_load_peak_runs_as_a_module(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    path = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(256, 256)}, str(path))
    out = subprocess.run(
        [sys.executable, "-m", "ops.bench.weights.load_peak", str(path), "--pairs", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.splitlines()
    assert len(out) == 3  # one line per read (old, new), then the summary
    assert json.loads(out[-1])["file_mib"] == pytest.approx(path.stat().st_size / 2**20)
    assert "'tensors_mib': 0.25" in out[0] and "'tensors_mib': 0.25" in out[1]


def test_the_learner_growth_probe_fits_a_slope_and_runs_its_arms_on_a_real_model(tiny_model_dir, capsys):
    """Both arms of `ops.bench.learner_growth` (real steps, a real publish) on the tiny model, two steps each."""
    from ops.bench.learner_growth import main, slope

    assert slope([1.0, 3.0, 5.0]) == pytest.approx(2.0) and slope([7.0]) == 0.0
    assert slope([10.0, 10.0, 10.0, 10.0]) == 0.0
    assert main(["--steps", "2", "--settle", "0", "--caches", "64", "--model", str(tiny_model_dir)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["train cache 64", "publish cache 64"]
    assert all("over 2 steps; slope" in line and "s median" in line for line in lines)
