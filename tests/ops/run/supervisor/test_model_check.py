"""`slca up` checks that the model it serves and trains is on disk before it starts anything: without it serve exited
at its start again and again while `slca up` said it was serving, and the warm start failed."""

import argparse

import pytest

from ops.run.supervisor.up import check_model, run_up
from slca.cli import CliError
from slca.config import load_config


def test_no_model_stops_up_before_any_process_with_what_to_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(None, [f"common.data_dir={tmp_path / 'data'}", f"common.cache_dir={tmp_path / 'cache'}"])
    with pytest.raises(CliError, match=r"no model at .*: run `slca model fetch`"):
        run_up(argparse.Namespace(config=None, set=[]), config)
    assert not (tmp_path / "data" / "logs").exists()  # nothing was started
    explicit = load_config(None, [f"common.model={tmp_path / 'nowhere'}"])
    with pytest.raises(CliError, match="set common.model to a model directory"):
        check_model(explicit)


def test_a_model_on_disk_or_a_host_that_loads_none_passes(tiny_model_dir, tmp_path):
    check_model(load_config(None, [f"common.model={tiny_model_dir}"]))
    check_model(load_config(None, [f"common.model={tmp_path / 'nowhere'}", 'ops.processes=["worker", "assembler"]']))
