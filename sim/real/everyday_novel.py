"""Real tools of the everyday pack that only the held-out `novel` task split offers: loans, compound interest,
text statistics, Roman numerals, ISO weeks and number statistics. Exact results, pure Python.

They are registered in the everyday pack (a served episode runs them like any everyday tool), but no train or
test task ever offers them (`sim.tasks.generate`), so the warm start and the feed never see their schemas.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable

from sim.real.dates import parse_date
from sim.real.registry import RealTool, ToolError

ROMAN = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
]


def to_roman(number: int) -> str:
    if not 1 <= number <= 3999:
        raise ToolError(f"invalid argument 'number': Roman numerals cover 1 to 3999, got {number}")
    out = []
    for value, letters in ROMAN:
        count, number = divmod(number, value)
        out.append(letters * count)
    return "".join(out)


def _in_range(what: str, compute: Callable[[], dict[str, float]]) -> dict[str, float]:
    """`compute()`, or a ToolError when the arguments put it outside what a float holds (a policy asked for 1e6 %
    compounded daily for a century: OverflowError, a traceback in serve's log, soak 2026-12-06) or divide by zero."""
    try:
        out = compute()
    except (OverflowError, ZeroDivisionError):
        out = {}
    if not out or not all(math.isfinite(v) for v in out.values()):
        raise ToolError(f"invalid arguments: the {what} is out of range for these values")
    return out


async def loan_payment(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    principal, rate, months = float(args["principal"]), float(args["annual_rate_percent"]), int(args["years"]) * 12
    monthly_rate = rate / 1200

    def compute() -> dict[str, float]:
        payment = (
            principal / months if monthly_rate == 0 else principal * monthly_rate / (1 - (1 + monthly_rate) ** -months)
        )
        payment = round(payment, 2)
        total = round(payment * months, 2)
        return {"monthly_payment": payment, "total_paid": total, "total_interest": round(total - principal, 2)}

    return _in_range("payment", compute)


async def compound_interest(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    principal, rate, years = float(args["principal"]), float(args["rate_percent"]), float(args["years"])
    per_year = int(args.get("compounds_per_year", 1))  # the schema's default: yearly compounding

    def compute() -> dict[str, float]:
        amount = round(principal * (1 + rate / 100 / per_year) ** (per_year * years), 2)
        return {"amount": amount, "interest": round(amount - principal, 2)}

    return {**_in_range("amount", compute), "compounds_per_year": per_year}


async def text_stats(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    text = args["text"]
    return {"words": len(text.split()), "characters": len(text), "letters": sum(ch.isalpha() for ch in text)}


async def roman_numeral(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    return {"number": int(args["number"]), "roman": to_roman(int(args["number"]))}


async def iso_week(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    year, week, _ = parse_date(args["date"], "date").isocalendar()
    return {"date": args["date"], "iso_year": year, "week": week}


async def number_stats(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    numbers, decimals = [float(x) for x in args["numbers"]], int(args.get("decimals", 2))
    if not numbers:
        raise ToolError("invalid argument 'numbers': give at least one number")
    return {
        "count": len(numbers),
        "mean": round(statistics.fmean(numbers), decimals),
        "median": round(statistics.median(numbers), decimals),
        "min": min(numbers),
        "max": max(numbers),
    }


NUM, INT = {"type": "number"}, {"type": "integer"}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _p(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


NOVEL_TOOLS = [
    RealTool(
        "loan_payment",
        "Monthly payment of a fixed-rate loan repaid over whole years.",
        _obj(
            {
                "principal": _p({**NUM, "exclusiveMinimum": 0}, "Amount borrowed"),
                "annual_rate_percent": _p({**NUM, "minimum": 0}, "Yearly interest rate in percent"),
                "years": _p({**INT, "minimum": 1}, "Loan term in years"),
            },
            ["principal", "annual_rate_percent", "years"],
        ),
        loan_payment,
        _obj(
            {"monthly_payment": NUM, "total_paid": NUM, "total_interest": NUM},
            ["monthly_payment", "total_paid", "total_interest"],
        ),
    ),
    RealTool(
        "compound_interest",
        "Future value of a deposit earning compound interest.",
        _obj(
            {
                "principal": _p({**NUM, "minimum": 0}, "Amount deposited"),
                "rate_percent": _p(NUM, "Yearly interest rate in percent"),
                "years": _p({**NUM, "minimum": 0}, "How many years it stays invested"),
                "compounds_per_year": _p({**INT, "minimum": 1, "default": 1}, "Compounding periods per year"),
            },
            ["principal", "rate_percent", "years"],
        ),
        compound_interest,
        _obj({"amount": NUM, "interest": NUM, "compounds_per_year": INT}, ["amount", "interest", "compounds_per_year"]),
    ),
    RealTool(
        "text_stats",
        "Count the words, characters and letters of a text.",
        _obj({"text": _p({"type": "string"}, "The text to measure")}, ["text"]),
        text_stats,
        _obj({"words": INT, "characters": INT, "letters": INT}, ["words", "characters", "letters"]),
    ),
    RealTool(
        "roman_numeral",
        "Write a whole number (1-3999) in Roman numerals.",
        _obj({"number": _p({**INT, "minimum": 1, "maximum": 3999}, "The number to write")}, ["number"]),
        roman_numeral,
        _obj({"number": INT, "roman": {"type": "string"}}, ["number", "roman"]),
    ),
    RealTool(
        "iso_week",
        "ISO 8601 week number (and week-based year) of a date.",
        _obj({"date": _p({"type": "string"}, "The date, YYYY-MM-DD")}, ["date"]),
        iso_week,
        _obj({"date": {"type": "string"}, "iso_year": INT, "week": INT}, ["date", "iso_year", "week"]),
    ),
    RealTool(
        "number_stats",
        "Mean, median, minimum and maximum of a list of numbers.",
        _obj(
            {
                "numbers": _p({"type": "array", "items": NUM, "minItems": 1}, "The numbers"),
                "decimals": _p({**INT, "minimum": 0, "maximum": 6, "default": 2}, "Decimal places of mean and median"),
            },
            ["numbers"],
        ),
        number_stats,
        _obj(
            {"count": INT, "mean": NUM, "median": NUM, "min": NUM, "max": NUM},
            ["count", "mean", "median", "min", "max"],
        ),
    ),
]
NOVEL_TOOL_NAMES = frozenset(tool.name for tool in NOVEL_TOOLS)
