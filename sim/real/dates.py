"""A tool's date argument (YYYY-MM-DD), read alike by the everyday tools and the novel split's (`everyday_novel`):
one module below both, so that neither imports the other for it."""

from __future__ import annotations

from datetime import date

from sim.real.registry import ToolError


def parse_date(text: str, field: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise ToolError(f"invalid argument '{field}': expected a date YYYY-MM-DD, got {text!r}") from None
