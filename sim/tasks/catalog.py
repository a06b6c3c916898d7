"""Simulated everyday tools (answered by SGLS): task distractors and a few simulated-tool intents (and those
only the held-out `novel` split offers, `NOVEL_SIMULATED_TOOLS`).

Optional parameters declare a JSON-schema `default` (unit, max_results, duration_minutes): a call may omit
them, and a gold call that omits one matches a call passing the default (`workers.scoring.match`)."""

from __future__ import annotations

from typing import Any


def _fn(name: str, description: str, props: dict[str, Any], required: list[str], response: dict[str, Any]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required},
            "x-mode": "simulated",
            "x-response-schema": response,
        },
    }


S, N, I = {"type": "string"}, {"type": "number"}, {"type": "integer"}


def _d(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required if required is not None else list(props)}


SIMULATED_TOOLS: list[dict[str, Any]] = [
    _fn(
        "get_weather",
        "Current weather for a city.",
        {
            "city": _d(S, "City name"),
            "unit": {
                "type": "string",
                "enum": ["celsius", "fahrenheit"],
                "default": "celsius",
                "description": "Temperature unit",
            },
        },
        ["city"],
        _obj(
            {
                "city": S,
                "temperature": N,
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "condition": {"type": "string", "enum": ["sunny", "cloudy", "rain", "snow", "windy"]},
                "humidity": I,
            }
        ),
    ),
    _fn(
        "send_email",
        "Send an e-mail.",
        {
            "to": _d({"type": "string", "format": "email"}, "Recipient address"),
            "subject": _d(S, "Subject line"),
            "body": _d(S, "Message text"),
        },
        ["to", "subject", "body"],
        _obj({"message_id": S, "status": {"type": "string", "enum": ["sent", "queued"]}, "to": S}),
    ),
    _fn(
        "search_web",
        "Search the web and return the top results.",
        {
            "query": _d(S, "Search query"),
            "max_results": _d({"type": "integer", "minimum": 1, "maximum": 10, "default": 5}, "How many results"),
        },
        ["query"],
        _obj(
            {
                "query": S,
                "results": {
                    "type": "array",
                    "items": _obj({"title": S, "url": {"type": "string", "format": "uri"}, "snippet": S}),
                },
            }
        ),
    ),
    _fn(
        "get_stock_price",
        "Latest trading price of a stock.",
        {"symbol": _d(S, "Ticker symbol, e.g. AAPL")},
        ["symbol"],
        _obj({"symbol": S, "price": N, "currency": S, "change_percent": N}),
    ),
    _fn(
        "create_calendar_event",
        "Create an event in the user's calendar.",
        {
            "title": _d(S, "Event title"),
            "date": _d({"type": "string", "format": "date"}, "Date, YYYY-MM-DD"),
            "time": _d(S, "Start time, HH:MM"),
            "duration_minutes": _d({**I, "minimum": 1, "default": 60}, "Length in minutes"),
        },
        ["title", "date"],
        _obj(
            {
                "event_id": S,
                "title": S,
                "date": {"type": "string", "format": "date"},
                "status": {"type": "string", "enum": ["confirmed"]},
            }
        ),
    ),
    _fn(
        "get_event",
        "Fetch a calendar event by id.",
        {"event_id": _d(S, "The event id")},
        ["event_id"],
        _obj(
            {
                "event_id": S,
                "title": S,
                "date": {"type": "string", "format": "date"},
                "status": {"type": "string", "enum": ["confirmed", "cancelled"]},
            }
        ),
    ),
    _fn(
        "book_restaurant",
        "Reserve a table at a restaurant.",
        {
            "restaurant": _d(S, "Restaurant name"),
            "date": _d({"type": "string", "format": "date"}, "YYYY-MM-DD"),
            "time": _d(S, "HH:MM"),
            "party_size": _d({"type": "integer", "minimum": 1, "maximum": 20}, "Number of guests"),
        },
        ["restaurant", "date", "party_size"],
        _obj(
            {
                "booking_id": S,
                "restaurant": S,
                "date": S,
                "party_size": I,
                "status": {"type": "string", "enum": ["confirmed", "waitlisted"]},
            }
        ),
    ),
    _fn(
        "translate_text",
        "Translate text into another language.",
        {"text": _d(S, "Text to translate"), "target_language": _d(S, "Language code, e.g. es")},
        ["text", "target_language"],
        _obj({"translation": S, "source_language": S, "target_language": S}),
    ),
    _fn(
        "get_exchange_rate",
        "Exchange rate between two currencies.",
        {"base": _d(S, "Currency code, e.g. USD"), "quote": _d(S, "Currency code, e.g. EUR")},
        ["base", "quote"],
        _obj({"base": S, "quote": S, "rate": {"type": "number", "exclusiveMinimum": 0}}),
    ),
]


NOVEL_SIMULATED_TOOLS: list[dict[str, Any]] = [
    _fn(
        "get_air_quality",
        "Current air quality index (AQI) of a city.",
        {"city": _d(S, "City name")},
        ["city"],
        _obj(
            {
                "city": S,
                "aqi": {"type": "integer", "minimum": 0, "maximum": 300},
                "category": {"type": "string", "enum": ["good", "moderate", "unhealthy"]},
                "main_pollutant": {"type": "string", "enum": ["pm25", "pm10", "ozone", "no2"]},
            }
        ),
    ),
    _fn(
        "get_flight_status",
        "Live status of a flight by its flight number.",
        {"flight_number": _d(S, "Flight number, e.g. BA117")},
        ["flight_number"],
        _obj(
            {
                "flight_number": S,
                "status": {"type": "string", "enum": ["scheduled", "boarding", "delayed", "departed", "landed"]},
                "gate": {"type": "string", "pattern": "^[A-F][1-9]$"},
            }
        ),
    ),
    _fn(
        "add_todo",
        "Add an item to the user's to-do list.",
        {
            "task": _d(S, "What to do"),
            "due_date": _d({"type": "string", "format": "date"}, "Due date, YYYY-MM-DD"),
            "priority": {
                "type": "string",
                "enum": ["low", "normal", "high"],
                "default": "normal",
                "description": "Priority",
            },
        },
        ["task", "due_date"],
        _obj(
            {
                "todo_id": S,
                "task": S,
                "due_date": {"type": "string", "format": "date"},
                "priority": S,
                "status": {"type": "string", "enum": ["open"]},
            }
        ),
    ),
    _fn(
        "lookup_definition",
        "Dictionary definition of an English word.",
        {"word": _d(S, "The word to define")},
        ["word"],
        _obj({"word": S, "definition": S}),
    ),
]
"""Simulated tools only the held-out `novel` split offers (never a train or test task, not even as a distractor)."""


def simulated_by_name() -> dict[str, dict[str, Any]]:
    """Every simulated everyday tool by name, the novel split's included."""
    return {t["function"]["name"]: t for t in [*SIMULATED_TOOLS, *NOVEL_SIMULATED_TOOLS]}
