"""`slca up` checks the `[sim]` section before it starts anything: a wrong `sim.world_seed` is one clear error."""

import argparse

import pytest

from ops.run.supervisor.up import run_up
from slca.config import ConfigError, load_config


def test_a_missing_world_seed_stops_up_before_any_process(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(None, [f"common.data_dir={tmp_path / 'data'}", "sim.world_seed=no-such-seed.json"])
    with pytest.raises(ConfigError, match="sim.world_seed.*neither a τ² domain"):
        run_up(argparse.Namespace(config=None, set=[]), config)
    assert not (tmp_path / "data" / "logs").exists()  # nothing was started
