"""The deterministic schema synthesiser: a JSON value satisfying a schema, seeded by (tool, canonical args).

Values are chosen by field name and format so that they look like an API's (ids, dates, e-mails, prices,
temperatures, ...). Same seed, same value. Supports local `$ref`/`$defs`, anyOf/oneOf/allOf, enum/const,
type lists, bounds, lengths and item counts; `pattern` by a bounded generator (`sim.patterns`), else "".

The schema is a caller's, so the work is bounded (`sim.bounds.SchemaLimits`): nesting, items per array,
properties per object, string lengths, total output bytes and a deadline. A schema that cannot be satisfied
within them (`minItems: 10**9`, a required property per byte of budget) raises `SchemaLimitError`: the
response is refused, never truncated into something invalid.
"""

from __future__ import annotations

import json
import math
import random
import string
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

from sim import patterns
from sim.bounds import DEFAULT_LIMITS, SchemaLimitError, SchemaLimits, check_deadline, within

FIRST = ["Emma", "Liam", "Olivia", "Noah", "Ava", "Mei", "Omar", "Sofia", "Yusuf", "Chloe", "Raj", "Lena"]
LAST = ["Kim", "Garcia", "Brown", "Kovacs", "Smith", "Nguyen", "Muller", "Rossi", "Khan", "Silva", "Ito"]
CITIES = ["Paris", "Tokyo", "New York", "Berlin", "Lagos", "Lima", "Sydney", "Toronto", "Mumbai", "Madrid"]
COUNTRIES = ["France", "Japan", "United States", "Germany", "Nigeria", "Peru", "Australia", "Canada", "India"]
STREETS = ["Main St", "Oak Avenue", "Elm Street", "Park Road", "Maple Drive", "Cedar Lane"]
WORDS = ["confirmed", "available", "standard", "premium", "express", "basic", "active", "scheduled"]
SENTENCES = [
    "Request processed successfully.",
    "The item is in stock and ships within two days.",
    "Partly cloudy with a light breeze.",
    "Your booking has been confirmed.",
    "No issues were found.",
    "The operation completed as requested.",
]
BASE_DAY = date(2026, 5, 1)


def seed_of(text: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


class Synthesiser:
    """Walks a schema with a seeded RNG. One instance per response (it holds the root for `$ref`)."""

    def __init__(self, root: dict[str, Any], seed: int, limits: SchemaLimits = DEFAULT_LIMITS):
        self.root = root
        self.rng = random.Random(seed)
        self.limits = limits
        self.spent = 0
        """Approximate JSON bytes of the value so far."""

    def spend(self, size: int) -> None:
        self.spent += size
        if self.spent > self.limits.max_output_bytes:
            raise SchemaLimitError(f"the response would be larger than {self.limits.max_output_bytes} bytes")

    def value(self, schema: Any, name: str = "", depth: int = 0) -> Any:
        check_deadline("response synthesis")
        if not isinstance(schema, dict) or depth > self.limits.max_depth:
            return self._scalar(self._by_name_string(name))
        schema = self._resolve(schema)
        if "const" in schema:
            return self._scalar(schema["const"])
        if "enum" in schema:
            return self._scalar(self.rng.choice(schema["enum"]))
        for key in ("anyOf", "oneOf"):
            if key in schema and schema[key]:
                options = [self._resolve(s) for s in schema[key]]
                non_null = [s for s in options if s.get("type") != "null"] or options
                return self.value(non_null[0] if key == "oneOf" else self.rng.choice(non_null), name, depth + 1)
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                merged = _merge(merged, self._resolve(part))
            return self.value({**{k: v for k, v in schema.items() if k != "allOf"}, **merged}, name, depth + 1)
        kind = schema.get("type") or _infer_type(schema)
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        out = GENERATORS.get(kind, Synthesiser._any)(self, schema, name, depth)
        return out if isinstance(out, (dict, list)) else self._scalar(out)

    def _scalar(self, value: Any) -> Any:
        """Charge a leaf's JSON size (objects and arrays charge their own punctuation and keys)."""
        if isinstance(value, str):
            self.spend(len(value) + 2)
        elif isinstance(value, (dict, list)):  # a const or enum value: bounded by the schema's own size
            self.spend(len(json.dumps(value, default=str)))
        else:
            self.spend(len(repr(value)))
        return value

    def _resolve(self, schema: Any) -> dict[str, Any]:
        if not isinstance(schema, dict):  # a boolean schema
            return {}
        seen = 0
        while "$ref" in schema and seen < 20:
            ref = schema["$ref"]
            if not ref.startswith("#/"):
                return {}
            node: Any = self.root
            for part in ref[2:].split("/"):
                node = node.get(part, {}) if isinstance(node, dict) else {}
            schema = {**node, **{k: v for k, v in schema.items() if k != "$ref"}}
            seen += 1
        return schema

    def _object(self, schema: dict[str, Any], name: str, depth: int) -> dict[str, Any]:
        props: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        room = self.limits.max_properties - len(required & props.keys())
        if room < 0:
            raise SchemaLimitError(f"an object requires more than {self.limits.max_properties} properties")
        self.spend(2)
        out = {}
        for key, sub in props.items():
            if key in required or (self.rng.random() < 0.8 and room > 0):
                room -= key not in required
                self.spend(len(key) + 4)
                out[key] = self.value(sub, key, depth + 1)
        extra = schema.get("additionalProperties")
        if not props and isinstance(extra, dict):
            keys = self._resolve(schema.get("propertyNames", {})).get("enum") or [f"{name or 'item'}_1"]
            for key in keys[: min(self.rng.randint(1, len(keys)), self.limits.max_properties)]:
                self.spend(len(str(key)) + 4)
                out[key] = self.value(extra, key if keys[0] != f"{name or 'item'}_1" else name, depth + 1)
        return out

    def _array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        singular = name[:-1] if name.endswith("s") else name
        positions = schema.get("prefixItems", [])
        low = max(schema.get("minItems", 1 if depth < 3 else 0), len(positions) if "prefixItems" in schema else 0)
        if low > self.limits.max_items:
            raise SchemaLimitError(f"an array needs more than {self.limits.max_items} items")
        self.spend(2)
        if "prefixItems" in schema:  # a tuple: one value per position
            return [self._item(item, singular, depth) for item in positions]
        high = max(low, min(schema.get("maxItems", 3), low + 3, self.limits.max_items))
        items = schema.get("items", {})
        return [self._item(items, singular, depth) for _ in range(self.rng.randint(low, high))]

    def _item(self, schema: Any, name: str, depth: int) -> Any:
        self.spend(1)
        return self.value(schema, name, depth + 1)

    def _string(self, schema: dict[str, Any], name: str, depth: int) -> str:
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if low > self.limits.max_string:
            raise SchemaLimitError(f"a string needs more than {self.limits.max_string} characters")
        fmt = schema.get("format") or _format_hint(str(schema.get("description", "")))
        text = FORMATS[fmt](self) if fmt in FORMATS else self._by_name_string(name)
        if isinstance(schema.get("pattern"), str):
            text = self._patterned(schema["pattern"], text, low, high)
        if high is not None:
            text = text[:high]
        return text + "x" * max(0, low - len(text))

    def _patterned(self, pattern: str, text: str, low: int, high: int | None) -> str:
        """`text` if the pattern matches it, else a generated match within the lengths, else "" (best effort)."""
        try:
            if patterns.search(pattern, text):
                return text
        except SchemaLimitError:
            pass  # refused or too slow on this candidate: a generated one may still do
        cap = min(high if high is not None else self.limits.max_string, self.limits.max_string)
        for _ in range(3):
            check_deadline("response synthesis")
            made = patterns.generate(pattern, self.rng, cap)
            if made is not None and len(made) >= low:
                return made
        return ""

    def _number(self, schema: dict[str, Any], name: str, depth: int, integer: bool = False) -> float | int:
        low, high = _schema_bounds(schema, integer)
        pref_low, pref_high = _name_range(name)
        if max(low, pref_low) <= min(high, pref_high):  # the realistic range for the name, within the schema's
            low, high = max(low, pref_low), min(high, pref_high)
        elif low == -BIG or high == BIG:  # half-open schema range: stay near its finite end
            low, high = (low, low + 1000) if high == BIG else (high - 1000, high)
        if integer:
            lo, hi = math.ceil(low), math.floor(high)
            return self.rng.randint(lo, max(lo, hi))
        value = self.rng.uniform(low, high)
        nice = round(value, 2 if _is_money(name) else 1)
        return nice if low <= nice <= high else value

    def _integer(self, schema: dict[str, Any], name: str, depth: int) -> int:
        return int(self._number(schema, name, depth, integer=True))

    def _boolean(self, schema: dict[str, Any], name: str, depth: int) -> bool:
        return self.rng.random() < 0.5

    def _null(self, schema: dict[str, Any], name: str, depth: int) -> None:
        return None

    def _any(self, schema: dict[str, Any], name: str, depth: int) -> Any:
        return self._by_name_string(name)

    def _by_name_string(self, name: str) -> str:
        key = name.lower()
        if key == "id" or key.endswith(("_id", "uuid", "identifier")):
            return self.ident(key)
        for words, make in NAME_RULES:
            if any(w in key for w in words):
                return make(self, key)
        return self.rng.choice(WORDS) if len(key) < 12 else self.rng.choice(SENTENCES)

    def ident(self, key: str) -> str:
        stem = key.removesuffix("_id").removesuffix("id").strip("_") or "id"
        if stem in ("reservation", "booking", "confirmation"):
            return "".join(self.rng.choice(string.ascii_uppercase + string.digits) for _ in range(6))
        return f"{stem[:4]}_{self.rng.getrandbits(40):010x}"

    def day(self, spread: int = 365) -> date:
        return BASE_DAY + timedelta(days=self.rng.randint(-spread // 3, spread))


BIG = 1e12


def _schema_bounds(schema: dict[str, Any], integer: bool) -> tuple[float, float]:
    """The closed interval a number must lie in (exclusive bounds moved inwards by one step)."""
    step = 1 if integer else 1e-6
    low = max(schema.get("minimum", -BIG), schema.get("exclusiveMinimum", -BIG - step) + step)
    high = min(schema.get("maximum", BIG), schema.get("exclusiveMaximum", BIG + step) - step)
    return low, max(low, high)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {**a, **b}
    if "properties" in a and "properties" in b:
        out["properties"] = {**a["properties"], **b["properties"]}
    if "required" in a and "required" in b:
        out["required"] = sorted(set(a["required"]) | set(b["required"]))
    return out


def _infer_type(schema: dict[str, Any]) -> str:
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "string" if schema else "object"


def _format_hint(description: str) -> str | None:
    """A format implied by the field's description (APIs often document it there, not in `format`)."""
    for marker, fmt in (
        ("YYYY-MM-DDTHH", "date-time"),
        ("YYYY-MM-DD", "date"),
        ("IATA", "iata"),
        ("IANA", "time-zone"),
        ("e-mail", "email"),
    ):
        if marker.lower() in description.lower():
            return fmt
    return None


def _is_money(name: str) -> bool:
    return any(w in name for w in ("price", "amount", "cost", "total", "balance", "fee", "fare", "salary"))


NUMBER_RANGES: list[tuple[tuple[str, ...], tuple[float, float]]] = [
    (("temp",), (-10.0, 35.0)),
    (("humidity", "percent", "probability", "chance"), (0.0, 100.0)),
    (("lat",), (-60.0, 70.0)),
    (("lon", "lng"), (-170.0, 170.0)),
    (("rating", "stars", "score"), (1.0, 5.0)),
    (("year",), (2020.0, 2026.0)),
    (("age",), (18.0, 90.0)),
    (("price", "amount", "cost", "total", "balance", "fee", "fare"), (5.0, 500.0)),
    (("count", "quantity", "num", "number", "bags", "baggage", "seats"), (0.0, 9.0)),
    (("wind", "speed"), (0.0, 60.0)),
    (("minutes", "duration"), (5.0, 240.0)),
]


def _name_range(name: str) -> tuple[float, float]:
    key = name.lower()
    for words, bounds in NUMBER_RANGES:
        if any(w in key for w in words):
            return bounds
    return (0.0, 1000.0)


FORMATS: dict[str, Callable[[Synthesiser], str]] = {
    "date": lambda s: s.day().isoformat(),
    "date-time": lambda s: (
        datetime.combine(s.day(), datetime.min.time()).replace(hour=s.rng.randint(6, 22)).isoformat() + "Z"
    ),
    "time": lambda s: f"{s.rng.randint(0, 23):02d}:{s.rng.choice([0, 15, 30, 45]):02d}:00",
    "email": lambda s: f"{s.rng.choice(FIRST).lower()}.{s.rng.choice(LAST).lower()}@example.com",
    "uri": lambda s: f"https://api.example.com/v1/items/{s.rng.getrandbits(32):08x}",
    "uuid": lambda s: (
        "%08x-%04x-4%03x-8%03x-%012x"
        % (
            s.rng.getrandbits(32),
            s.rng.getrandbits(16),
            s.rng.getrandbits(12),
            s.rng.getrandbits(12),
            s.rng.getrandbits(48),
        )
    ),
    "ipv4": lambda s: ".".join(str(s.rng.randint(1, 254)) for _ in range(4)),
}
FORMATS["url"] = FORMATS["uri"]
FORMATS["time-zone"] = lambda s: s.rng.choice(["Europe/Paris", "Asia/Tokyo", "America/New_York", "Australia/Sydney"])
FORMATS["iata"] = lambda s: s.rng.choice(["JFK", "LAX", "SFO", "ORD", "DFW", "SEA", "BOS", "MIA", "ATL", "DEN"])

NAME_RULES: list[tuple[tuple[str, ...], Callable[[Synthesiser, str], str]]] = [
    (("email",), lambda s, k: FORMATS["email"](s)),
    (("url", "link", "href", "website"), lambda s, k: FORMATS["uri"](s)),
    (("created_at", "updated_at", "timestamp", "datetime"), lambda s, k: FORMATS["date-time"](s)),
    (("dob", "birth"), lambda s, k: (BASE_DAY - timedelta(days=s.rng.randint(20 * 365, 70 * 365))).isoformat()),
    (("date", "day"), lambda s, k: s.day().isoformat()),
    (("time",), lambda s, k: FORMATS["time"](s)),
    (("first_name", "firstname", "given"), lambda s, k: s.rng.choice(FIRST)),
    (("last_name", "lastname", "surname", "family"), lambda s, k: s.rng.choice(LAST)),
    (("name", "user", "customer", "passenger", "author"), lambda s, k: f"{s.rng.choice(FIRST)} {s.rng.choice(LAST)}"),
    (("phone", "mobile"), lambda s, k: f"+1-{s.rng.randint(200, 989)}-555-{s.rng.randint(1000, 9999)}"),
    (("zip", "postal", "postcode"), lambda s, k: f"{s.rng.randint(10000, 99999)}"),
    (("address", "street", "address1"), lambda s, k: f"{s.rng.randint(1, 999)} {s.rng.choice(STREETS)}"),
    (("city", "town", "location", "origin", "destination"), lambda s, k: s.rng.choice(CITIES)),
    (("country",), lambda s, k: s.rng.choice(COUNTRIES)),
    (("currency",), lambda s, k: s.rng.choice(["USD", "EUR", "GBP", "JPY"])),
    (("status",), lambda s, k: s.rng.choice(["confirmed", "pending", "completed", "active"])),
    (("state", "province", "region"), lambda s, k: s.rng.choice(["CA", "NY", "TX", "WA", "IL", "FL"])),
    (
        ("number", "code", "sku", "ref"),
        lambda s, k: f"{''.join(s.rng.choice(string.ascii_uppercase) for _ in range(3))}{s.rng.randint(100, 999)}",
    ),
    (("unit",), lambda s, k: s.rng.choice(["celsius", "km", "kg", "USD"])),
    (
        ("description", "summary", "message", "text", "comment", "note", "content", "body", "reason"),
        lambda s, k: s.rng.choice(SENTENCES),
    ),
    (
        ("title", "subject", "label"),
        lambda s, k: f"{s.rng.choice(WORDS).title()} {s.rng.choice(['plan', 'item', 'report', 'event'])}",
    ),
    (("condition", "weather", "forecast"), lambda s, k: s.rng.choice(["sunny", "cloudy", "rain", "snow", "windy"])),
]

GENERATORS: dict[str, Callable[..., Any]] = {
    "object": Synthesiser._object,
    "array": Synthesiser._array,
    "string": Synthesiser._string,
    "number": Synthesiser._number,
    "integer": Synthesiser._integer,
    "boolean": Synthesiser._boolean,
    "null": Synthesiser._null,
}


def synthesise(schema: dict[str, Any], seed: int, limits: SchemaLimits = DEFAULT_LIMITS) -> Any:
    """A value satisfying `schema` (best effort for patterns), the same for the same seed. Raises
    SchemaLimitError when no value fits the limits (or the deadline passes)."""
    with within(limits):
        return Synthesiser(schema, seed, limits).value(schema)
