"""The tool-calling workload of `slca bench serve --prompts tools` (issue 40): requests of an agent's size — a system
prompt carrying six tool schemas (≈ 700 tokens) and a multi-turn history (a question, a tool call, its answer, a
reply, a follow-up) — instead of one short question.

Chat requests carry the schemas in the system message's text, in the Hermes layout the model's chat template writes
(`system_with_tools`), so both servers get the same prompt without either parsing tools; agent runs send the same
system text without them and the tools as `tools`, which slca renders into the prompt itself and executes (the sim
answers the calls). The history is plain text on both (tool calls and answers written as the template writes them),
so no server has to accept tool messages it would render differently."""

from __future__ import annotations

import json

from ops.common.builtin_tasks import function_tool

SYSTEM = "You are a helpful assistant for a small company. Use the tools when they help; answer briefly."


def _s(description: str, **kw) -> dict:
    return {"type": "string", "description": description, **kw}


TOOLS = [
    function_tool(
        "get_weather",
        "Current weather and a three-day forecast for a city: temperature, precipitation, wind and warnings.",
        {"city": _s("City name, optionally with the country"), "units": _s("Units", enum=["metric", "imperial"])},
        ["city"],
    ),
    function_tool(
        "search_calendar",
        "Find events in the user's calendar between two dates, optionally matching words in the title or notes.",
        {
            "start": _s("First day, YYYY-MM-DD"),
            "end": _s("Last day, YYYY-MM-DD"),
            "query": _s("Words to match in titles and notes"),
        },
        ["start", "end"],
    ),
    function_tool(
        "create_event",
        "Add an event to the user's calendar. Fails if it overlaps an event marked busy, unless force is true.",
        {
            "title": _s("Title of the event"),
            "start": _s("Start, YYYY-MM-DDTHH:MM in the user's time zone"),
            "minutes": {"type": "integer", "description": "Length in minutes", "minimum": 5, "maximum": 600},
            "attendees": {"type": "array", "items": _s("E-mail address"), "description": "People to invite"},
            "force": {"type": "boolean", "description": "Book even over a busy event"},
        },
        ["title", "start", "minutes"],
    ),
    function_tool(
        "send_email",
        "Send an e-mail from the user's account. The body is plain text; attachments are ids from search_files.",
        {
            "to": {"type": "array", "items": _s("E-mail address"), "description": "Recipients"},
            "subject": _s("Subject line"),
            "body": _s("Plain-text body"),
            "attachments": {"type": "array", "items": _s("File id"), "description": "Files to attach"},
        },
        ["to", "subject", "body"],
    ),
    function_tool(
        "search_files",
        "Search the company's shared drive by words in the name or the content; returns ids, names and owners.",
        {
            "query": _s("Words to search for"),
            "kind": _s("Kind of file", enum=["document", "spreadsheet", "slides", "pdf", "any"]),
            "limit": {"type": "integer", "description": "Most results to return", "minimum": 1, "maximum": 50},
        },
        ["query"],
    ),
    function_tool(
        "convert_currency",
        "Convert an amount between two currencies at today's reference rate.",
        {
            "amount": {"type": "number", "description": "Amount to convert"},
            "from_currency": _s("ISO 4217 code, e.g. EUR"),
            "to_currency": _s("ISO 4217 code, e.g. USD"),
        },
        ["amount", "from_currency", "to_currency"],
    ),
]

_CONVERSATIONS = [
    ("What's the weather in Lisbon tomorrow?", "get_weather", {"city": "Lisbon"},
     {"tomorrow": {"high_c": 24, "low_c": 16, "rain_mm": 0}}, "Dry, 16–24 °C.", "And should I pack a jacket?"),
    ("Do I have anything on Friday the 12th?", "search_calendar", {"start": "2027-03-12", "end": "2027-03-12"},
     {"events": [{"title": "Budget review", "start": "10:00", "minutes": 60}]},
     "One event: the budget review at 10:00.", "Book a lunch with Ana right after it."),
    ("Find the latest pricing sheet.", "search_files", {"query": "pricing", "kind": "spreadsheet"},
     {"results": [{"id": "f-311", "name": "Pricing 2027 v3", "owner": "maria"}]},
     "Found “Pricing 2027 v3” (Maria's).", "Email it to tom@example.com with a short note."),
    ("How much is 1,250 euros in dollars?", "convert_currency",
     {"amount": 1250, "from_currency": "EUR", "to_currency": "USD"}, {"amount": 1356.25, "rate": 1.085},
     "About 1,356 USD.", "And in pounds?"),
    ("Is it going to rain in Oslo this weekend?", "get_weather", {"city": "Oslo, Norway"},
     {"saturday": {"rain_mm": 6}, "sunday": {"rain_mm": 0}}, "Rain on Saturday, dry on Sunday.",
     "Move my Saturday run to Sunday morning then."),
    ("What meetings do I have next week?", "search_calendar", {"start": "2027-03-15", "end": "2027-03-19"},
     {"events": [{"title": "1:1 Sam", "start": "Mon 09:00"}, {"title": "Launch sync", "start": "Wed 14:00"}]},
     "Two: a 1:1 with Sam on Monday and the launch sync on Wednesday.", "Send Sam the agenda for Monday."),
    ("Where is the onboarding checklist?", "search_files", {"query": "onboarding checklist", "kind": "document"},
     {"results": [{"id": "f-102", "name": "Onboarding checklist", "owner": "hr"}]},
     "It's the “Onboarding checklist” document owned by HR.", "Share it with the two new hires."),
    ("Convert 300 dollars to yen.", "convert_currency", {"amount": 300, "from_currency": "USD", "to_currency": "JPY"},
     {"amount": 44850, "rate": 149.5}, "About 44,850 JPY.", "What's the weather like in Tokyo right now?"),
]  # fmt: skip
"""(question, tool, arguments, tool answer, assistant reply, follow-up): one multi-turn history each."""


def system_with_tools(system: str = SYSTEM, tools: list[dict] = TOOLS) -> str:
    """The system message as Hermes-style chat templates (Qwen's) write it when given `tools`."""
    schemas = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        f"{system}\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
        f"provided with function signatures within <tools></tools> XML tags:\n<tools>\n{schemas}\n</tools>\n\nFor "
        "each function call, return a json object with function name and arguments within <tool_call></tool_call> "
        'XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def history(i: int) -> list[dict]:
    """Conversation i's turns after the system message: question, call, answer, reply, follow-up."""
    question, tool, arguments, answer, reply, follow_up = _CONVERSATIONS[i % len(_CONVERSATIONS)]
    call = json.dumps({"name": tool, "arguments": arguments}, ensure_ascii=False)
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"},
        {"role": "user", "content": f"<tool_response>\n{json.dumps(answer, ensure_ascii=False)}\n</tool_response>"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": follow_up},
    ]


def chat_messages(i: int) -> list[dict]:
    """A chat request's messages: the tool schemas in the system text, then conversation i."""
    return [{"role": "system", "content": system_with_tools()}, *history(i)]


def agent_messages(i: int) -> list[dict]:
    """An agent run's messages (its tools go in `tools`: slca renders them into the system prompt)."""
    return [{"role": "system", "content": SYSTEM}, *history(i)]
