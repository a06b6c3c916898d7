"""Components plug into `slca` through entry points: their commands (`slca.cli`) and settings (`slca.settings`)."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

import pytest

import slca.cli
from slca.config import sections


def test_every_component_registers_its_settings_section():
    # `weights` is shared like `common` (the publisher and every server read it): registered beside it, not by a plug-in
    assert set(sections()) == {"common", "weights", "serve", "sim", "workers", "learner", "ops"}
    assert sections()["common"] == "slca.config:CommonSettings"


def test_every_component_registers_its_commands():
    names = {ep.name for ep in entry_points(group=slca.cli.CLI_GROUP)}
    assert {"serve", "sim", "workers", "learner", "ops"} <= names
    parser = slca.cli.build_parser()
    assert parser.missing == {}
    for argv in (["serve", "--help"], ["train", "--help"], ["sft", "--help"], ["worker", "--help"]):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(argv)
        assert exc.value.code == 0


def test_a_component_that_is_not_installed_is_named_in_the_error(monkeypatch, capsys):
    ghost = EntryPoint(name="ghost", value="ghost_component.cli:register", group=slca.cli.CLI_GROUP)
    real = list(entry_points(group=slca.cli.CLI_GROUP))
    monkeypatch.setattr(slca.cli, "entry_points", lambda group: [*real, ghost])
    with pytest.raises(SystemExit) as exc:
        slca.cli.main(["haunt"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'haunt'" in err and "components not installed: ghost (no module 'ghost_component')" in err


def test_an_import_error_inside_an_installed_component_is_not_hidden(monkeypatch, tmp_path):
    (tmp_path / "broken_component").mkdir()
    (tmp_path / "broken_component" / "__init__.py").write_text("")
    (tmp_path / "broken_component" / "cli.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = EntryPoint(name="broken", value="broken_component.cli:register", group=slca.cli.CLI_GROUP)
    monkeypatch.setattr(slca.cli, "entry_points", lambda group: [broken])
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):
        slca.cli.build_parser()
