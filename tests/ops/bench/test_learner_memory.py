"""`slca bench learner-memory`: each window is a fresh learner process with its own settings, reporting its peak
resident set beside trained tokens/s; gradient checkpointing (side B's default) really reaches the child."""

import argparse

import pytest

from ops.bench.learner_memory import _overrides, _window


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
