"""`learner.sft_gradient_checkpointing`: true and false as set; `auto` turns it on where the warm start's peak
without it would not fit in the memory available (learner/sft.py `gradient_checkpointing_on`)."""

from __future__ import annotations

import pytest

from learner.settings import LearnerSettings
from learner.sft import gradient_checkpointing_on


@pytest.mark.parametrize(
    ("choice", "available", "on"),
    [
        ("auto", 6_000.0, True),  # a 16 GiB laptop with serve up beside it
        ("auto", 20_000.0, False),  # room for the ≈ 8.7 GiB peak: the faster path
        ("auto", None, False),  # the kernel does not say: as before the setting existed
        (True, 50_000.0, True),
        (False, 1_000.0, False),
    ],
)
def test_checkpointing_follows_the_setting_and_auto_the_memory_available(choice, available, on):
    settings = LearnerSettings(sft_gradient_checkpointing=choice, sft_checkpointing_below_mib=12_288)
    chosen, why = gradient_checkpointing_on(settings, available)
    assert chosen is on
    assert ("auto" in why) == (choice == "auto") and (available is None or choice != "auto" or "MiB" in why)


def test_auto_is_the_default_and_its_bound_is_a_setting():
    settings = LearnerSettings()
    assert settings.sft_gradient_checkpointing == "auto"
    assert gradient_checkpointing_on(settings.model_copy(update={"sft_checkpointing_below_mib": 0}), 1.0)[0] is False
    with pytest.raises(ValueError):
        LearnerSettings(sft_gradient_checkpointing="sometimes")
