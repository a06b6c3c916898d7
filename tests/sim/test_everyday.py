"""The everyday real pack: exact results, and the calculator never evaluates code."""

from __future__ import annotations

import asyncio

import pytest

from sim.real.calculator import evaluate
from sim.real.everyday import everyday_pack
from sim.real.registry import ToolError


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 + 3 * 4", 14),
        ("(3 + 4) * 2^3", 56),
        ("sqrt(81) / 3", 3),
        ("10 // 3 + 10 % 3", 4),
        ("round(2 / 3, 4)", 0.6667),
        ("-2 ** 2", -4),
    ],
)
def test_calculator_exact(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "(1).__class__",
        "[x for x in range(9)]",
        "lambda: 1",
        "2 ** 10 ** 10",
        "1 / 0",
        "9" * 600,
    ],
)
def test_calculator_refuses_anything_but_arithmetic(expression):
    with pytest.raises(ToolError):
        evaluate(expression)


def _call(name, arguments):
    tool = everyday_pack().tools[name]
    return asyncio.run(tool.fn(arguments, None))


def test_conversions_time_zones_and_dates_are_exact():
    assert _call("convert_units", {"value": 100, "from_unit": "C", "to_unit": "F"})["result"] == 212
    assert _call("convert_units", {"value": 1, "from_unit": "mi", "to_unit": "km"})["result"] == 1.609344
    with pytest.raises(ToolError, match="cannot convert"):
        _call("convert_units", {"value": 1, "from_unit": "kg", "to_unit": "km"})
    # Summer time: Paris is UTC+2 and New York UTC-4 on 2026-07-01.
    out = _call(
        "convert_timezone", {"datetime": "2026-07-01T12:00", "from_tz": "Europe/Paris", "to_tz": "America/New_York"}
    )
    assert out == {"datetime": "2026-07-01T06:00", "time_zone": "America/New_York", "utc_offset": "-04:00"}
    assert _call("days_between", {"start_date": "2024-02-01", "end_date": "2024-03-01"})["days"] == 29
    assert _call("add_days", {"date": "2024-12-30", "days": 3}) == {"date": "2025-01-02", "weekday": "Thursday"}
    assert _call("day_of_week", {"date": "2000-01-01"})["weekday"] == "Saturday"
    assert _call("split_bill", {"amount": 100, "tip_percent": 20, "people": 4}) == {
        "tip": 20.0,
        "total": 120.0,
        "per_person": 30.0,
    }
