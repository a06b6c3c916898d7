"""`[weights]` (slca/weights/settings.py): one section for every weights key, read by the learner and serve; a key of
an earlier version in `[common]`, `[serve]` or `[learner]` is refused naming its new place — from a file, the
environment or `--set`, all of them in one message."""

from __future__ import annotations

import pytest

from learner.cli import learner_transport
from serve.settings import ServeSettings
from slca.cli import CliError
from slca.config import Config, ConfigError, load_config, moved_keys, sections
from slca.weights import DiskTransport, HttpTransport, ManifestPolicy, WeightsSettings


@pytest.fixture(autouse=True)
def _no_config_file(monkeypatch, tmp_path):
    monkeypatch.delenv("SLCA_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./slca.toml


def test_weights_is_a_registered_section_read_from_file_environment_and_overrides(tmp_path, monkeypatch):
    assert sections()["weights"] == "slca.weights.settings:WeightsSettings"
    path = tmp_path / "slca.toml"
    path.write_text('[weights]\ntransport = "http"\nkeep_versions = 5\nfollow = false\n')
    monkeypatch.setenv("SLCA_WEIGHTS__KEY", "from-env")
    w = load_config(path, ["weights.max_version_jump=7"]).get(WeightsSettings)
    assert (w.transport, w.keep_versions, w.follow, w.key, w.max_version_jump) == ("http", 5, False, "from-env", 7)
    assert load_config(None, ["weights.follow=false"]).section("weights").follow is False


def test_an_unknown_transport_is_refused_listing_the_registered_ones():
    with pytest.raises(ConfigError, match=r"weights\.transport: .*unknown weight transport 'pigeon'; registered: auto"):
        load_config(None, ["weights.transport=pigeon"]).get(WeightsSettings)


@pytest.mark.parametrize("old, new", sorted(moved_keys().items()))
def test_every_moved_key_names_its_new_place_from_an_override(old, new):
    with pytest.raises(ConfigError, match=f"override {old}=... is now {new}=..."):
        load_config(None, [f"{old}=1"])
    section, _, field = new.partition(".")
    assert field in WeightsSettings.model_fields and section == "weights"


def test_an_old_file_is_fixed_in_one_read(tmp_path):
    path = tmp_path / "old.toml"
    path.write_text(
        '[common]\nweights_key = "k"\n[serve]\nweights_transport = "http"\nsubscribe_weights = false\n'
        '[learner]\nweights_bind = "0.0.0.0:9200"\nkeep_versions = 2\n'
    )
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    for old in ("common.weights_key", "serve.weights_transport", "serve.subscribe_weights", "learner.weights_bind"):
        assert f"{old} is now {moved_keys()[old]}" in message
    assert "learner.keep_versions is now weights.keep_versions" in message and str(path) in message


def test_old_environment_variables_name_the_new_ones(monkeypatch):
    monkeypatch.setenv("SLCA_WEIGHTS_KEY", "k")  # a common field's short form, as `slca up` used to set it
    monkeypatch.setenv("SLCA_SERVE__WEIGHTS_TRANSPORT", "http")
    with pytest.raises(ConfigError) as err:
        load_config()
    assert "$SLCA_WEIGHTS_KEY is now $SLCA_WEIGHTS__KEY (weights.key)" in str(err.value)
    assert "$SLCA_SERVE__WEIGHTS_TRANSPORT is now $SLCA_WEIGHTS__TRANSPORT (weights.transport)" in str(err.value)


def test_a_moved_key_in_a_config_built_in_code_is_named_too():
    with pytest.raises(ConfigError, match=r"serve\.max_version_jump is now weights\.max_version_jump"):
        Config(raw={"serve": {"max_version_jump": 3}}).get(ServeSettings)


def test_serve_verifies_with_the_weights_section():
    policy = ManifestPolicy.from_settings(WeightsSettings(key="k", max_version_jump=9))
    assert (policy.key, policy.allow_unsigned, policy.max_version_jump) == ("k", False, 9)


def test_the_learner_picks_its_transport_by_weights_transport(tmp_path):
    weights_dir = tmp_path / "weights"
    assert isinstance(learner_transport(WeightsSettings(), weights_dir), DiskTransport)  # auto, no bind
    served = learner_transport(WeightsSettings(bind="127.0.0.1:0", key="k"), weights_dir)  # auto, with a bind
    try:
        assert isinstance(served, HttpTransport) and served.url_for(1).startswith("http://127.0.0.1:")
    finally:
        served.close()
    # another rank publishes nothing: the disk's, whatever the transport
    other = learner_transport(WeightsSettings(transport="http", bind="127.0.0.1:0"), weights_dir, main_rank=False)
    assert isinstance(other, DiskTransport)


@pytest.mark.parametrize(
    "weights, says",
    [
        (WeightsSettings(transport="http"), "weights.transport=http needs weights.bind"),
        (WeightsSettings(transport="disk", bind="127.0.0.1:0"), "weights.transport=disk serves nothing"),
    ],
)
def test_a_transport_that_does_not_fit_the_address_is_a_cli_error(weights, says, tmp_path):
    with pytest.raises(CliError, match=says.replace(".", r"\.")):
        learner_transport(weights, tmp_path / "weights")
