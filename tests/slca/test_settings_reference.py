"""One settings reference, generated from the settings classes: `slca config reference` lists every key (nested
sections included) with its type, default and docstring; `docs/settings.md` is its output and must match the code;
the README restates no default that the code contradicts (its settings tables link to the reference instead)."""

from __future__ import annotations

import difflib
import json
import math
import re
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from slca.cli import main
from slca.config import SectionSettings, _import, sections
from slca.settings_reference import (
    REGENERATE,
    UNSET,
    all_settings,
    attribute_docs,
    reference,
    section_tree,
    to_markdown,
    type_name,
)

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "settings.md"


def test_docs_settings_md_matches_the_code():
    expected = to_markdown()
    current = DOC.read_text(encoding="utf-8") if DOC.is_file() else ""
    if current != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    current.splitlines(True), expected.splitlines(True), "docs/settings.md", "generated", n=0
                )
            )[:40]
        )
        pytest.fail(
            f"docs/settings.md disagrees with the settings classes; regenerate it (repository root): "
            f"`{REGENERATE}`\n{diff}"
        )


def _walk(prefix: str, cls: type[BaseModel]):
    for name, info in cls.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _walk(f"{prefix}.{name}", ann)
        else:
            yield f"{prefix}.{name}"


def test_every_key_of_every_section_is_listed_with_its_default():
    listed = all_settings()
    assert not reference()[1], "every registered section's package is installed here"
    expected = [key for name, path in sections().items() for key in _walk(name, _import(path))]
    assert sorted(listed) == sorted(expected)
    assert "learner.advantage.w_exec" in listed and "learner.loss.kl_beta" in listed
    for name, path in sections().items():
        dumped = _import(path)().model_dump(mode="json")
        for key, setting in listed.items():
            if not key.startswith(name + "."):
                continue
            value = dumped
            for part in key.split(".")[1:]:
                value = value[part]
            if setting.default is UNSET:
                assert setting.default_note, key  # computed on this machine: described, not shown
            else:
                assert setting.default == value, key
    assert listed["common.cache_dir"].default is UNSET  # depends on $HOME: the page stays the same everywhere
    assert listed["common.admin_token"].secret and not listed["serve.port"].secret
    assert listed["sim.fault_rate"].constraints == ("≥ 0.0", "≤ 1.0")
    assert listed["learner.advantage.reasoning_route"].type == '"next" | "prev" | "none"'
    assert listed["serve.served_model_name"].type == "str | None"
    assert listed["serve.port"].doc.startswith("Port of the OpenAI-compatible API")


def test_order_is_deterministic_and_grouped_by_section():
    names = [s.name for s in reference()[0]]
    assert names[0] == "common"
    top = [n for n in names if "." not in n]
    assert top == ["common", *sorted(n for n in sections() if n != "common")]
    assert names.index("learner") < names.index("learner.advantage") < names.index("ops")
    assert to_markdown() == to_markdown()


class _Inner(SectionSettings):
    """Inner knobs."""

    x: int = Field(default=3, ge=1)
    """The x."""


class _Outer(SectionSettings):
    plain: str | None = None
    """First line
    second line."""
    undocumented: bool = False
    inner: _Inner = Field(default_factory=_Inner)
    """Inner section."""
    after: list[str] = Field(default_factory=lambda: ["a"])
    """After the sub-section."""


def test_docstrings_types_defaults_of_a_class():
    assert attribute_docs(_Outer) == {
        "plain": "First line\nsecond line.",
        "inner": "Inner section.",
        "after": "After the sub-section.",
    }
    outer, inner = section_tree("demo", _Outer)
    assert [s.key for s in outer.settings] == ["demo.plain", "demo.undocumented", "demo.after"]
    assert outer.settings[2].default == ["a"]
    assert (inner.name, inner.doc) == ("demo.inner", "Inner knobs.")
    (x,) = inner.settings
    assert (x.key, x.type, x.default, x.constraints, x.doc) == ("demo.inner.x", "int", 3, ("≥ 1",), "The x.")
    assert type_name(dict[str, list[int]] | None) == "dict[str, list[int]] | None"


def test_command_prints_writes_and_checks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no ./slca.toml: the reference does not depend on the configuration anyway
    assert main(["config", "reference", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    keys = [s["key"] for sec in data["sections"] for s in sec["settings"]]
    assert keys == list(all_settings())
    assert main(["config", "reference"]) == 0
    assert capsys.readouterr().out == to_markdown()

    out = tmp_path / "docs" / "settings.md"
    assert main(["config", "reference", "--write", str(out)]) == 0
    assert "written" in capsys.readouterr().out
    assert out.read_text(encoding="utf-8") == to_markdown()
    mtime = out.stat().st_mtime_ns
    assert main(["config", "reference", "--write", str(out)]) == 0  # idempotent: nothing rewritten
    assert "up to date" in capsys.readouterr().out and out.stat().st_mtime_ns == mtime
    assert main(["config", "reference", "--write", str(out), "--check"]) == 0
    out.write_text("stale\n", encoding="utf-8")
    assert main(["config", "reference", "--write", str(out), "--check"]) == 1
    assert REGENERATE in capsys.readouterr().out
    assert out.read_text(encoding="utf-8") == "stale\n"


# --- the README restates no default the code contradicts ---------------------------------------------------------

_UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "minutes": 60.0}


def _key_pattern() -> str:
    return r"(?:%s)\.[a-z_][\w.]*[a-z0-9_*]" % "|".join(map(re.escape, sections()))


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").replace("_", ""))
    except ValueError:
        return None


def _cell_value(text: str):
    """A default as a table cell writes it: `1e-5`, 16384 (16 KiB), unset, `true`, `[]`, `vllm`."""
    text = re.sub(r"\s*\(.*\)\s*$", "", text.strip()).strip("`").strip()
    if text.lower() in ("unset", "null", "none"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _agrees(claimed, default, key: str, unit: str | None = None) -> bool:
    if isinstance(claimed, (int, float)) and not isinstance(claimed, bool):
        if not isinstance(default, (int, float)) or isinstance(default, bool):
            return False
        if unit:  # a duration written in other units than the key's (`claim_idle_ms` (30 s))
            own = next((u for u in _UNITS if key.endswith("_" + u)), "s")
            claimed = claimed * _UNITS[unit] / _UNITS[own]
        return math.isclose(claimed, default, rel_tol=1e-9)
    return claimed == default


def readme_disagreements(text: str, settings: dict) -> list[str]:
    """Defaults `text` restates that `settings` (dotted key → `Setting`) contradict: rows of a Markdown table with a
    'default' column, and prose of the form "`section.key` (N unit …" / "`section.key` (default N …"."""
    key_re = _key_pattern()
    problems: list[str] = []

    def check(where: str, key: str, claimed, unit: str | None = None) -> None:
        s = settings.get(key)
        if s is None:
            problems.append(f"{where}: `{key}` is no setting (renamed or removed?)")
        elif s.default is UNSET or not _agrees(claimed, s.default, key, unit):
            shown = s.default_note if s.default is UNSET else json.dumps(s.default)
            problems.append(f"{where}: `{key}` restated as {claimed!r}{' ' + unit if unit else ''}; the code: {shown}")

    lines = text.splitlines()
    col = None
    for n, line in enumerate(lines, 1):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))] if line.startswith("|") else None
        if cells is None:
            col = None
        elif col is None and any(c.lower() == "default" for c in cells):
            col = [c.lower() for c in cells].index("default")
        elif col is not None and not set(line) <= set("|-: ") and len(cells) > col:
            keys = re.findall(rf"`({key_re})`", cells[0])
            values = [v.strip() for v in cells[col].split(" / ")]
            if not keys:
                problems.append(f"README.md:{n}: a default restated for {cells[0]}, which names no `section.key`")
            for key, value in zip(keys, values if len(values) == len(keys) else [cells[col]] * len(keys)):
                if key.endswith(".*"):
                    for sub, raw in re.findall(r"`?(\w+)=([^`,]+)`?", value):
                        check(f"README.md:{n}", f"{key[:-2]}.{sub}", _cell_value(raw))
                else:
                    check(f"README.md:{n}", key, _cell_value(value))
    prose = re.compile(
        rf"`({key_re})`\s*\((?:default\s+)?(-?\d[\d,_]*(?:\.\d+)?(?:e-?\d+)?)(?:\s*(ms|s|min|minutes)\b)?(?=[\s;,)=])"
    )
    for m in prose.finditer(text):
        line_no = text.count("\n", 0, m.start()) + 1
        check(f"README.md:{line_no}", m[1], _number(m[2]), m[3])
    return problems


def test_readme_restates_no_default_the_code_contradicts():
    problems = readme_disagreements((REPO / "README.md").read_text(encoding="utf-8"), all_settings())
    assert not problems, (
        "README.md restates defaults the settings classes disagree with: fix the README, or better drop the value "
        "and link to docs/settings.md (generated: `" + REGENERATE + "`)\n" + "\n".join(problems)
    )


def test_the_readme_check_catches_a_stale_default():
    settings = all_settings()
    port = settings["serve.port"].default
    table = (
        "| setting | default | meaning |\n|---|---|---|\n"
        f"| `serve.port` | {port} | the port |\n"
        "| `serve.host` / `serve.max_n` | `0.0.0.0` / 16 | bind |\n"
        "| `learner.loss.*` | `eps_low=0.2`, `kl_beta=7` | the loss |\n"
        "| `serve.redis_connect_timeout_s` | 2 (s) | connect |\n"
    )
    problems = readme_disagreements(table, settings)
    assert any("serve.host" in p for p in problems)
    assert any("learner.loss.kl_beta" in p for p in problems)
    assert not any("serve.port" in p or "eps_low" in p or "max_n" in p or "connect_timeout" in p for p in problems)
    claim_s = settings["workers.claim_idle_ms"].default / 1000
    log_bytes = settings["ops.log_max_bytes"].default
    prose = (
        f"taken over after `workers.claim_idle_ms` ({claim_s:g} s), `workers.group_timeout_s` (-1 s) must outlast "
        f"it;\n`ops.log_max_bytes`\n({log_bytes} = {log_bytes >> 20} MiB; 0: never), `weights.bind` (e.g. "
        "`0.0.0.0:9200`), `serve.gone_s` (5 s)"
    )
    problems = readme_disagreements(prose, settings)
    assert len(problems) == 2, problems
    assert "group_timeout_s" in problems[0] and "no setting" in problems[1]


# --- CLI flags take their defaults from the settings --------------------------------------------------------------


def test_worker_loglevel_defaults_to_common_log_level(monkeypatch, tmp_path):
    import workers.celery_app

    monkeypatch.chdir(tmp_path)
    argvs = []

    class App:
        def worker_main(self, argv):
            argvs.append(argv)

    monkeypatch.setattr(workers.celery_app, "make_celery_app", lambda *a, **k: App())
    assert main(["worker"]) == 0
    assert main(["--set", "common.log_level=WARNING", "worker"]) == 0
    assert main(["--set", "common.log_level=WARNING", "worker", "--loglevel", "DEBUG"]) == 0
    levels = [argv[argv.index("--loglevel") + 1] for argv in argvs]
    assert levels == [all_settings()["common.log_level"].default, "WARNING", "DEBUG"]
