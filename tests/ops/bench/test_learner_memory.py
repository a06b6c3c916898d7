"""`slca bench learner-memory`: each window is a fresh learner process with its own settings, reporting its peak
resident set beside trained tokens/s; gradient checkpointing (side B's default) really reaches the child."""

import argparse

import pytest

from ops.bench.learner_memory import _overrides, _values_b_changes, _window


def test_settings_are_read_as_learner_fields_with_booleans():
    assert _overrides(["learner.gradient_checkpointing=true", "precision=fp32", "share_prefix=False"]) == {
        "gradient_checkpointing": True,
        "precision": "fp32",
        "share_prefix": False,
    }


@pytest.mark.parametrize("checkpointing", [False, True])
def test_a_window_is_a_fresh_learner_process_with_its_settings(tiny_model_dir, checkpointing):
    args = argparse.Namespace(
        model=str(tiny_model_dir), steps=2, groups=1, group_size=2, prompt_tokens=24, completion_tokens=8
    )
    sets = ["learner.precision=fp32", f"learner.gradient_checkpointing={str(checkpointing).lower()}"]
    m = _window(args, sets)
    assert m.units == 2 * 2 * 8 and m.waves == 2 and m.figure == m.units / m.seconds
    d = m.detail
    assert d["gradient_checkpointing"] is checkpointing and d["autocast"] is False
    assert d["peak_rss_mib"] >= d["loaded_rss_mib"] > 0
    assert len(d["step_s"]) == 2


def test_an_unknown_setting_fails_the_window_with_the_childs_error(tiny_model_dir):
    args = argparse.Namespace(
        model=str(tiny_model_dir), steps=1, groups=1, group_size=2, prompt_tokens=8, completion_tokens=4
    )
    with pytest.raises(RuntimeError, match="precision"):
        _window(args, ["learner.precision=fp64"])


def test_side_a_is_named_by_its_own_values_of_what_side_b_changes():
    from slca.cli import CliError
    from slca.config import load_config

    config = load_config(None, [])
    default = str(config.section("learner").gradient_checkpointing).lower()
    b = ["learner.gradient_checkpointing=" + ("false" if default == "true" else "true"), "learner.precision=fp32"]
    named = _values_b_changes(config, ["learner.precision=bf16"], b)
    assert named == [f"learner.gradient_checkpointing={default}"]
    with pytest.raises(CliError, match="no such setting"):
        _values_b_changes(config, [], ["learner.no_such_field=1"])
