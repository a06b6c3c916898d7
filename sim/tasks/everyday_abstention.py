"""Everyday abstention data: requests no everyday tool serves, and which tools could serve each intent.

With the knowledge questions of `no_tool`, these make about a quarter of the pack: the warm start must
see "no call" as often as it sees a call it could wrongly copy (BFCL irrelevance was 0.08 without them).
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.tasks.abstention import Unsupported, removed_intent, unsupported_intent
from sim.tasks.intents import Intent

ALWAYS_BANNED = {"search_web"}
"""A web search could look up nearly anything asked: never offered in an abstention task."""
CAN_SERVE = {
    "calc": [],
    "convert": ["calculator"],
    "timezone": [],
    "days_between": [],
    "add_days": [],
    "weekday": ["add_days"],
    "weekday_pair": ["add_days"],  # add_days returns the weekday of its result
    "percentage": ["calculator", "split_bill"],  # split_bill's tip is a percentage of the amount
    "split_bill": ["calculator", "percentage"],
    "split_bill_even": ["calculator", "percentage"],
    "split_bill_tip_only": ["calculator", "percentage"],
    "weeks_between": ["calculator"],
    "weather": [],
    "create_event": [],
}
"""Per source intent, tools besides its gold tools that could still serve its request (withheld too)."""
_MATHS = ["calculator", "percentage", "split_bill", "convert_units", "get_exchange_rate"]
_DATES = ["days_between", "add_days", "day_of_week", "convert_timezone", "create_calendar_event"]
NEIGHBOURS = {
    "calc": _MATHS,
    "convert": _MATHS,
    "percentage": _MATHS,
    "split_bill": _MATHS,
    "split_bill_even": _MATHS,
    "split_bill_tip_only": _MATHS,
    "timezone": _DATES,
    "days_between": _DATES,
    "add_days": _DATES,
    "weekday": _DATES,
    "weekday_pair": _DATES,
    "weeks_between": _DATES,
    "weather": ["convert_units", "convert_timezone", "get_stock_price"],
    "create_event": ["get_event", "book_restaurant", "send_email"],
}
"""Tools of the same family, offered first when a source intent's tools are withheld (they look related)."""

SLOTS = {
    "city": ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Toronto", "Nairobi", "Seoul"],
    "city2": ["Madrid", "Denver", "Berlin", "Sydney", "Mumbai", "Chicago"],
    "when": ["next week", "this weekend", "on Friday", "in ten days", "tomorrow afternoon"],
    "past": ["2023-03-14", "2022-12-25", "2024-07-04", "2021-08-30", "last Tuesday"],
    "sym": ["AAPL", "MSFT", "TSLA", "NVDA", "AMZN", "GOOG"],
    "n": ["5", "10", "25", "100"],
    "evt": ["EVT-1042", "evt_88231", "EVT-7730", "evt_10456"],
    "bk": ["BK-5521", "R-20931", "BK-1187"],
    "title": ["dentist", "team sync", "gym", "project review"],
    "dow": ["Monday", "Thursday", "Friday"],
    "phone": ["+1 555 0142", "+44 20 7946 0958", "+81 3 5550 1234"],
    "name": ["Maria", "Ken", "Aisha", "Tom"],
    "amt": ["50", "200", "1,250", "75.40"],
    "hm": ["06:30", "07:15", "22:00", "05:45"],
    "place": ["the airport", "the train station", "Central Park", "my office"],
    "genre": ["jazz", "classical", "lo-fi", "rock"],
    "room": ["living room", "kitchen", "bedroom"],
    "track": ["1Z999AA10123456784", "TRK-448812", "9400 1000 0000 0000 0000 00"],
    "restaurant": ["Chez Marie", "Sakura House", "La Piazza", "The Green Table"],
}

REQUESTS: list[Unsupported] = [
    Unsupported(
        "forecast",
        (
            "What will the weather be like in {city} {when}?",
            "Will it rain in {city} {when}?",
            "I need the weather forecast for {city} {when}.",
        ),
        ("get_weather",),
    ),
    Unsupported(
        "past_weather",
        ("What was the weather in {city} on {past}?", "How cold did it get in {city} on {past}?"),
        ("get_weather",),
    ),
    Unsupported(
        "stock_history",
        (
            "What was {sym}'s closing price on {past}?",
            "How did {sym} stock do over the last year?",
            "Show me the price history of {sym} since {past}.",
        ),
        ("get_stock_price",),
    ),
    Unsupported("trade", ("Buy {n} shares of {sym} for me.", "Sell {n} of my {sym} shares."), ("get_stock_price",)),
    Unsupported(
        "cancel_event",
        ("Cancel my calendar event {evt}.", "Delete the event {evt} from my calendar."),
        ("get_event", "create_calendar_event"),
    ),
    Unsupported(
        "move_event",
        ("Move my {title} appointment to {dow}.", "Reschedule event {evt} to next {dow}."),
        ("create_calendar_event", "get_event"),
    ),
    Unsupported(
        "hotel",
        ("Book me a hotel room in {city} for {when}.", "Find a hotel in {city} under $150 a night."),
        ("book_restaurant",),
    ),
    Unsupported(
        "change_booking",
        ("Cancel my table reservation {bk}.", "Change my restaurant booking {bk} to 8 people."),
        ("book_restaurant",),
    ),
    Unsupported(
        "sms", ("Text {phone}: I'm running late.", "Send an SMS to {phone} saying I'll call back."), ("send_email",)
    ),
    Unsupported("phone_call", ("Call {name} for me.", "Start a video call with {name}."), ("send_email",)),
    Unsupported(
        "read_mail", ("Read me my latest e-mails.", "Do I have any unread messages from {name}?"), ("send_email",)
    ),
    Unsupported(
        "transfer",
        ("Transfer ${amt} to my savings account.", "Pay ${amt} to {name} by bank transfer."),
        ("get_exchange_rate", "split_bill"),
    ),
    Unsupported(
        "alarm",
        ("Set an alarm for {hm} tomorrow.", "Wake me up at {hm}."),
        ("convert_timezone", "day_of_week"),
        ("create_calendar_event",),
    ),  # an event with a reminder is close enough to an alarm: not offered
    Unsupported("taxi", ("Order a taxi to {place}.", "Get me a ride to {place} at {hm}."), ("book_restaurant",)),
    Unsupported("music", ("Play some {genre} music.", "Put on my {genre} playlist.")),
    Unsupported(
        "smart_home",
        ("Turn off the lights in the {room}.", "Set the {room} thermostat to 21 degrees."),
        ("convert_units",),
    ),
    Unsupported(
        "flight",
        ("Find the cheapest flight from {city} to {city2} {when}.", "Book me a flight from {city} to {city2} {when}."),
        ("book_restaurant", "convert_timezone"),
    ),
    Unsupported("parcel", ("Where is my package {track}?", "Track parcel {track} for me."), ("get_event",)),
    Unsupported(
        "bank",
        ("What's my bank account balance?", "How much did I spend on groceries last month?"),
        ("get_stock_price", "get_exchange_rate", "split_bill"),
    ),
    Unsupported(
        "directions",
        ("How do I get from {city} to {city2} by train?", "What's the driving distance from {city} to {city2}?"),
        ("convert_units", "convert_timezone"),
    ),
    Unsupported(
        "file_convert",
        ("Convert this PDF to a Word document.", "Turn my photo into a PNG file."),
        ("convert_units", "translate_text"),
    ),
    Unsupported(
        "reviews",
        ("What do people say about {restaurant}?", "Is {restaurant} any good? Show me reviews."),
        ("book_restaurant",),
    ),
    Unsupported(
        "fitness",
        ("Log my 5 km run in my fitness app.", "How many calories did I burn on my run today?"),
        ("convert_units",),
    ),
]


def with_slots(request: Unsupported, slots: dict[str, list[str]] = SLOTS) -> Unsupported:
    """The request with the slot values its phrasings use."""
    used = {name for text in request.phrasings for name in slots if "{" + name + "}" in text}
    return Unsupported(
        request.key, request.phrasings, request.near, request.cannot_offer, {name: slots[name] for name in sorted(used)}
    )


def abstention_intents(tool_intents: Sequence[Intent]) -> list[Intent]:
    """Unsupported requests (near misses offered) and tool intents' requests with their tools withheld."""
    return [
        unsupported_intent([with_slots(r) for r in REQUESTS], ALWAYS_BANNED, per_task=40),
        removed_intent(tool_intents, CAN_SERVE, NEIGHBOURS, ALWAYS_BANNED, per_task=40),
    ]
