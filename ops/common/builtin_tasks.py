"""A small built-in training pack, used only when the sim component's task packs are not installed."""

from __future__ import annotations

from slca.contracts import GoldCall, GroundTruth, Task


def function_tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    """An OpenAI-style function tool (no response schema: not for the simulator's catalog)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


WEATHER = function_tool(
    "get_weather",
    "Current weather for a city.",
    {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    ["city"],
)
CONVERT = function_tool(
    "convert_currency",
    "Convert an amount between currencies.",
    {"amount": {"type": "number"}, "from_currency": {"type": "string"}, "to_currency": {"type": "string"}},
    ["amount", "from_currency", "to_currency"],
)
TIMEZONE = function_tool("get_time", "Current local time in a city.", {"city": {"type": "string"}}, ["city"])

_CITIES = ["Paris", "Tokyo", "Lima", "Oslo", "Nairobi", "Toronto", "Hanoi", "Madrid"]
_PAIRS = [(20, "USD", "EUR"), (150, "GBP", "JPY"), (75.5, "EUR", "CHF"), (1000, "JPY", "USD")]


def builtin_tasks(split: str = "train") -> list[Task]:
    tools = [WEATHER, CONVERT, TIMEZONE]
    tasks: list[Task] = []
    for i, city in enumerate(_CITIES):
        tasks.append(
            Task(
                task_id=f"builtin-weather-{i}",
                split=split,
                tools=tools,
                intent="weather",
                messages=[{"role": "user", "content": f"What's the weather like in {city} right now?"}],
                ground_truth=GroundTruth(calls=[GoldCall(name="get_weather", arguments={"city": city})]),
            )
        )
        tasks.append(
            Task(
                task_id=f"builtin-time-{i}",
                split=split,
                tools=tools,
                intent="time",
                messages=[{"role": "user", "content": f"What time is it in {city}?"}],
                ground_truth=GroundTruth(calls=[GoldCall(name="get_time", arguments={"city": city})]),
            )
        )
    for i, (amount, src, dst) in enumerate(_PAIRS):
        args = {"amount": amount, "from_currency": src, "to_currency": dst}
        tasks.append(
            Task(
                task_id=f"builtin-convert-{i}",
                split=split,
                tools=tools,
                intent="convert",
                messages=[{"role": "user", "content": f"How much is {amount} {src} in {dst}?"}],
                ground_truth=GroundTruth(calls=[GoldCall(name="convert_currency", arguments=args)]),
            )
        )
    for i, (a, b) in enumerate(zip(_CITIES, reversed(_CITIES))):
        calls = [
            GoldCall(name="get_weather", arguments={"city": a}),
            GoldCall(name="get_weather", arguments={"city": b}),
        ]
        tasks.append(
            Task(
                task_id=f"builtin-weather2-{i}",
                split=split,
                tools=tools,
                intent="weather_parallel",
                messages=[{"role": "user", "content": f"Compare the weather in {a} and {b}."}],
                ground_truth=GroundTruth(calls=calls),
            )
        )
    return tasks
