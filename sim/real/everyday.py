"""The everyday real pack: calculator, unit conversion, time zones, dates, percentages, tips. Exact results.

Optional parameters declare their JSON-schema `default`, and the tool applies exactly that default when
the argument is omitted (so a call passing the default and one omitting it return the same result)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sim.real.calculator import evaluate
from sim.real.dates import parse_date
from sim.real.everyday_novel import NOVEL_TOOLS
from sim.real.registry import RealPack, RealTool, ToolError

# unit → (dimension, factor to the base unit); temperature is affine and handled apart.
UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "yd": ("length", 0.9144),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "l": ("volume", 1.0),
    "ml": ("volume", 0.001),
    "gal": ("volume", 3.785411784),
    "cup": ("volume", 0.2365882365),
    "km/h": ("speed", 1 / 3.6),
    "mph": ("speed", 0.44704),
    "m/s": ("speed", 1.0),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
    "C": ("temperature", 1.0),
    "F": ("temperature", 1.0),
    "K": ("temperature", 1.0),
}
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _to_kelvin(v: float, unit: str) -> float:
    return {"C": v + 273.15, "F": (v - 32) * 5 / 9 + 273.15, "K": v}[unit]


def _from_kelvin(k: float, unit: str) -> float:
    return {"C": k - 273.15, "F": (k - 273.15) * 9 / 5 + 32, "K": k}[unit]


def convert(value: float, from_unit: str, to_unit: str, precision: int = 6) -> float:
    (dim_a, fa), (dim_b, fb) = UNITS[from_unit], UNITS[to_unit]
    if dim_a != dim_b:
        raise ToolError(f"cannot convert {dim_a} ({from_unit}) to {dim_b} ({to_unit})")
    out = _from_kelvin(_to_kelvin(value, from_unit), to_unit) if dim_a == "temperature" else value * fa / fb
    return round(out, precision)


def _zone(name: str, field: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"invalid argument '{field}': unknown time zone {name!r} (use IANA names)") from None


async def calculator(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    return {"expression": args["expression"], "result": evaluate(args["expression"])}


async def convert_units(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    result = convert(float(args["value"]), args["from_unit"], args["to_unit"], int(args.get("precision", 6)))
    return {"value": args["value"], "from_unit": args["from_unit"], "to_unit": args["to_unit"], "result": result}


async def convert_timezone(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    try:
        local = datetime.fromisoformat(args["datetime"])
    except ValueError:
        raise ToolError(f"invalid argument 'datetime': expected YYYY-MM-DDTHH:MM, got {args['datetime']!r}") from None
    src, dst = _zone(args["from_tz"], "from_tz"), _zone(args["to_tz"], "to_tz")
    converted = local.replace(tzinfo=src).astimezone(dst)
    return {
        "datetime": converted.strftime("%Y-%m-%dT%H:%M"),
        "time_zone": args["to_tz"],
        "utc_offset": converted.strftime("%z")[:3] + ":" + converted.strftime("%z")[3:],
    }


async def days_between(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    start, end = parse_date(args["start_date"], "start_date"), parse_date(args["end_date"], "end_date")
    return {"start_date": args["start_date"], "end_date": args["end_date"], "days": (end - start).days}


async def add_days(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    day = parse_date(args["date"], "date") + timedelta(days=int(args["days"]))
    return {"date": day.isoformat(), "weekday": WEEKDAYS[day.weekday()]}


async def day_of_week(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    day = parse_date(args["date"], "date")
    return {"date": args["date"], "weekday": WEEKDAYS[day.weekday()]}


async def percentage(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    return {"result": round(float(args["percent"]) * float(args["value"]) / 100, 6)}


async def split_bill(args: dict[str, Any], _state: Any) -> dict[str, Any]:
    amount, tip, people = float(args["amount"]), float(args.get("tip_percent", 0)), int(args.get("people", 1))
    # the defaults are the schema's (`default` in TOOLS): an omitted optional argument means exactly that
    tip_amount = round(amount * tip / 100, 2)
    total = round(amount + tip_amount, 2)
    return {"tip": tip_amount, "total": total, "per_person": round(total / people, 2)}


NUM = {"type": "number"}
DATE = {"type": "string", "description": "Date as YYYY-MM-DD"}
UNIT = {"type": "string", "enum": sorted(UNITS)}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _param(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


TOOLS = [
    RealTool(
        "calculator",
        "Evaluate an arithmetic expression (+ - * / // % ** and sqrt, round, min, max, log...).",
        _obj(
            {"expression": _param({"type": "string"}, "The arithmetic expression, e.g. '(3 + 4) * 2'")}, ["expression"]
        ),
        calculator,
        _obj({"expression": {"type": "string"}, "result": NUM}, ["expression", "result"]),
    ),
    RealTool(
        "convert_units",
        "Convert a quantity between units of length, mass, volume, speed, time or temperature.",
        _obj(
            {
                "value": _param(NUM, "The quantity to convert"),
                "from_unit": _param(UNIT, "Unit of the value"),
                "to_unit": _param(UNIT, "Unit to convert to"),
                "precision": _param(
                    {"type": "integer", "minimum": 0, "maximum": 10, "default": 6},
                    "Decimal places to round the result to",
                ),
            },
            ["value", "from_unit", "to_unit"],
        ),
        convert_units,
        _obj(
            {"value": NUM, "from_unit": UNIT, "to_unit": UNIT, "result": NUM},
            ["value", "from_unit", "to_unit", "result"],
        ),
    ),
    RealTool(
        "convert_timezone",
        "Convert a local date and time from one time zone to another (IANA names).",
        _obj(
            {
                "datetime": _param({"type": "string"}, "Local date and time, YYYY-MM-DDTHH:MM"),
                "from_tz": _param({"type": "string"}, "IANA time zone of the given time, e.g. Europe/Paris"),
                "to_tz": _param({"type": "string"}, "IANA time zone to convert to, e.g. Asia/Tokyo"),
            },
            ["datetime", "from_tz", "to_tz"],
        ),
        convert_timezone,
        _obj(
            {"datetime": {"type": "string"}, "time_zone": {"type": "string"}, "utc_offset": {"type": "string"}},
            ["datetime", "time_zone", "utc_offset"],
        ),
    ),
    RealTool(
        "days_between",
        "Number of days from one date to another (negative when the end is earlier).",
        _obj(
            {"start_date": _param(DATE, "First date, YYYY-MM-DD"), "end_date": _param(DATE, "Second date, YYYY-MM-DD")},
            ["start_date", "end_date"],
        ),
        days_between,
        _obj({"start_date": DATE, "end_date": DATE, "days": {"type": "integer"}}, ["start_date", "end_date", "days"]),
    ),
    RealTool(
        "add_days",
        "The date a number of days after (or before, if negative) a given date.",
        _obj(
            {"date": _param(DATE, "Start date, YYYY-MM-DD"), "days": _param({"type": "integer"}, "Days to add")},
            ["date", "days"],
        ),
        add_days,
        _obj({"date": DATE, "weekday": {"type": "string", "enum": WEEKDAYS}}, ["date", "weekday"]),
    ),
    RealTool(
        "day_of_week",
        "The day of the week of a date.",
        _obj({"date": _param(DATE, "The date, YYYY-MM-DD")}, ["date"]),
        day_of_week,
        _obj({"date": DATE, "weekday": {"type": "string", "enum": WEEKDAYS}}, ["date", "weekday"]),
    ),
    RealTool(
        "percentage",
        "Compute a percentage of a value.",
        _obj(
            {"percent": _param(NUM, "The percentage, e.g. 15 for 15%"), "value": _param(NUM, "The base value")},
            ["percent", "value"],
        ),
        percentage,
        _obj({"result": NUM}, ["result"]),
    ),
    RealTool(
        "split_bill",
        "Add a tip to a bill and split the total between people.",
        _obj(
            {
                "amount": _param(NUM, "Bill amount before tip"),
                "tip_percent": _param({**NUM, "minimum": 0, "default": 0}, "Tip in percent"),
                "people": _param({"type": "integer", "minimum": 1, "default": 1}, "Number of people sharing"),
            },
            ["amount"],
        ),
        split_bill,
        _obj({"tip": NUM, "total": NUM, "per_person": NUM}, ["tip", "total", "per_person"]),
    ),
]


def everyday_pack() -> RealPack:
    """The everyday tools, and those only the held-out `novel` task split offers (`sim.real.everyday_novel`)."""
    pack = RealPack("everyday")
    for tool in [*TOOLS, *NOVEL_TOOLS]:
        pack.add(RealTool(**{**tool.__dict__}))
    return pack
