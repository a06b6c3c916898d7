"""Every component's command logs in one format (slca/logs.py)."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from slca.logs import LOG_FORMAT, setup_logging

REPO = Path(__file__).resolve().parents[2]


def test_setup_logging_uses_the_one_format(monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    setup_logging("DEBUG")
    assert root.level == logging.DEBUG and root.handlers[0].formatter._fmt == LOG_FORMAT


def test_no_component_sets_up_logging_its_own_way():
    """`logging.basicConfig` is called in slca/logs.py only."""
    calls = []
    for package in ("serve", "sim", "workers", "learner", "ops", "slca"):
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Attribute) and node.attr == "basicConfig":
                    calls.append(path.relative_to(REPO).as_posix())
    assert sorted(set(calls)) == ["slca/logs.py"]
