"""Secrets never shown: `slca config show` hides secret settings and URL passwords; `$SLCA_SET` carries overrides
out of argv."""

import json

import pytest

from slca.cli import main
from slca.config import OVERRIDES_ENV, ConfigError, is_secret_override, load_config, split_overrides
from slca.redaction import redact_url

SECRETS = {
    "common.admin_token": "adm-SECRET-1",
    "common.record_key": "rec-SECRET-2",
    "common.api_keys": '{"key-SECRET-3": ["serve"]}',
    "common.redis_url": "redis://:pw-SECRET-4@127.0.0.1:6379/0",
    "sim.llm_api_key": "llm-SECRET-5",
}


@pytest.mark.parametrize("fmt", ["json", "toml"])
def test_config_show_prints_no_secret(capsys, fmt):
    sets = [a for k, v in SECRETS.items() for a in ("--set", f"{k}={v}")]
    assert main([*sets, "config", "show", "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "SECRET" not in out
    assert "***" in out and "127.0.0.1:6379" in out  # where Redis is stays visible
    if fmt == "json":
        shown = json.loads(out)
        assert shown["common"]["admin_token"] == "***"
        assert list(shown["common"]["api_keys"].values()) == [["serve"]]  # scopes stay visible
        assert shown["common"]["redis_url"] == "redis://:***@127.0.0.1:6379/0"
        assert shown["common"]["log_level"] == "INFO"  # nothing else hidden


def test_redact_url_keeps_everything_but_the_password():
    assert redact_url("redis://user:p%40ss@h:1/0") == "redis://user:***@h:1/0"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"
    assert redact_url("see http://a:b@c and https://d:e@f") == "see http://a:***@c and https://d:***@f"


@pytest.mark.parametrize(
    "url, shown",
    [
        ("redis://:p@ss@h:1/0", "redis://:***@h:1/0"),  # the host follows the last '@', as urllib reads it
        ("redis://user:a@b:c@@h", "redis://user:***@h"),
        ("redis://:pw@h/0?next=@x", "redis://:***@h/0?next=@x"),  # an '@' past the authority is not the host's
        ("http://h:8000/users/@me", "http://h:8000/users/@me"),  # no user info: nothing to hide
    ],
)
def test_redact_url_hides_a_password_holding_at_signs(url, shown):
    assert redact_url(url) == shown
    assert "ss@" not in redact_url("x redis://:p@ss@h:1/0 y")


def test_secret_overrides_split_from_public_ones():
    items = ["serve.port=8001", "common.admin_token=x", "common.redis_url=redis://:p@h:1/0", "sim.llm_api_key=k"]
    public, secret = split_overrides(items)
    assert public == ["serve.port=8001"]
    assert secret == items[1:]
    assert not is_secret_override("common.redis_url=redis://h:1/0")


def test_overrides_from_environment_apply_like_set(monkeypatch):
    monkeypatch.setenv("SLCA_ADMIN_TOKEN", "from-env")
    monkeypatch.setenv(OVERRIDES_ENV, json.dumps(["common.admin_token=from-set-env", "serve.port=8111"]))
    cfg = load_config()
    assert cfg.common.admin_token == "from-set-env"  # above the plain environment
    assert load_config(overrides=["serve.port=8222"]).section("serve").port == 8222  # below the command line
    monkeypatch.setenv(OVERRIDES_ENV, "not json")
    with pytest.raises(ConfigError, match=OVERRIDES_ENV):
        load_config()


def test_bad_override_error_does_not_quote_the_value():
    with pytest.raises(ConfigError) as exc:
        load_config(overrides=["admin_token=hunter2"])
    assert "hunter2" not in str(exc.value)
