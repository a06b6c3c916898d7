"""Configuration precedence: defaults < TOML < environment < --set, and clear errors."""

import json

import pytest

from slca.cli import main
from slca.config import CommonSettings, ConfigError, load_config
from serve.settings import ServeSettings


def test_precedence(tmp_path, monkeypatch):
    f = tmp_path / "slca.toml"
    f.write_text('[serve]\nport = 9000\nhost = "0.0.0.0"\n[common]\nredis_url = "redis://file:1/0"\n')
    assert load_config(f).get(ServeSettings).port == 9000
    monkeypatch.setenv("SLCA_SERVE__PORT", "9100")
    monkeypatch.setenv("SLCA_REDIS_URL", "redis://env:2/0")
    cfg = load_config(f)
    assert cfg.get(ServeSettings).port == 9100
    assert cfg.get(ServeSettings).host == "0.0.0.0"
    assert cfg.get(CommonSettings).redis_url == "redis://env:2/0"
    assert load_config(f, ["serve.port=9200"]).get(ServeSettings).port == 9200


def test_errors_name_the_problem(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[serve]\nport = 'not a port'\n")
    with pytest.raises(ConfigError, match="serve.port"):
        load_config(f).get(ServeSettings)
    f.write_text("[nonsense]\nx = 1\n")
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(f)
    f.write_text("[serve\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(f)
    with pytest.raises(ConfigError, match="bad override"):
        load_config(None, ["port=1"])
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_config_show_cli(capsys, monkeypatch):
    monkeypatch.setenv("SLCA_SERVE__PORT", "8123")
    assert main(["--set", "common.log_level=DEBUG", "config", "show", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["serve"]["port"] == 8123
    assert shown["common"]["log_level"] == "DEBUG"
    assert main(["config", "show"]) == 0
    assert "[serve]" in capsys.readouterr().out


def test_cli_error_is_one_line(capsys):
    assert main(["--set", "serve.port=x", "config", "show"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slca: error:") and "Traceback" not in err
