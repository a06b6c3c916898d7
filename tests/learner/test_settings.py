"""`LearnerSettings`: the advantage and loss knobs are sub-models, set from a file, the environment or `--set`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from learner.settings import AdvantageSettings, LearnerSettings, LossSettings
from slca.config import ConfigError, load_config


def test_sub_models_from_file_environment_and_overrides(tmp_path, monkeypatch):
    path = tmp_path / "slca.toml"
    path.write_text(
        '[learner]\nestimator = "grpo"\n[learner.loss]\nname = "clip_tis"\neps_low = 0.1\n'
        "[learner.advantage]\nw_pref = 0.5\n"
    )
    monkeypatch.setenv("SLCA_LEARNER__LOSS__KL_BETA", "0.05")
    s = load_config(path, ["learner.advantage.turn_level=true", "learner.loss.tis_cap=3"]).get(LearnerSettings)
    # the environment and the overrides merge into the file's tables rather than replacing them
    assert s.loss == LossSettings(name="clip_tis", eps_low=0.1, kl_beta=0.05, tis_cap=3.0)
    assert s.advantage == AdvantageSettings(w_pref=0.5, turn_level=True)
    assert s.estimator == "grpo"


@pytest.mark.parametrize(
    "override, says",
    [
        ("learner.kl_beta=0.1", "learner.kl_beta is now learner.loss.kl_beta"),
        ("learner.adv_eps=1e-3", "learner.adv_eps is now learner.advantage.eps"),
        ("learner.loss=clip_tis", "set learner.loss.name=clip_tis"),
        ("learner.loss.eps=0.1", "learner.loss.eps"),  # unknown sub-field: named, not ignored
    ],
)
def test_old_flat_keys_and_unknown_sub_fields_are_errors_naming_the_place(override, says, monkeypatch):
    monkeypatch.delenv("SLCA_CONFIG", raising=False)
    with pytest.raises(ConfigError, match=says.replace(".", r"\.")):
        load_config(None, [override]).get(LearnerSettings)


def test_estimators_and_losses_get_the_sub_models_themselves():
    """No copy of the knobs: what the trainer passes is the settings object."""
    s = LearnerSettings()
    assert isinstance(s.advantage, AdvantageSettings) and isinstance(s.loss, LossSettings)
    with pytest.raises(ValidationError):
        s.loss.kl_beta = 1.0  # frozen: a step cannot change the knobs under the next one
