"""Everyday task pack: arithmetic, units, time zones, dates, percentages, bills, some simulated tools,
questions that need no tool, and requests none of the offered tools can serve (`everyday_abstention`).

Some requests name an optional argument (a rounding precision, a temperature unit, a duration, or leave
out the tip or the head count): the gold call passes it only when the user asked for a non-default value."""

from __future__ import annotations

import random
from datetime import date, timedelta

from sim.tasks.everyday_abstention import abstention_intents
from sim.tasks.intents import Intent, fmt_number, one_call, parallel_calls, summarise
from slca.contracts import GoldCall

CITY_ZONES = {
    "Paris": "Europe/Paris",
    "Tokyo": "Asia/Tokyo",
    "New York": "America/New_York",
    "London": "Europe/London",
    "Sydney": "Australia/Sydney",
    "Los Angeles": "America/Los_Angeles",
    "Mumbai": "Asia/Kolkata",
    "Sao Paulo": "America/Sao_Paulo",
    "Berlin": "Europe/Berlin",
    "Singapore": "Asia/Singapore",
}
CONVERSIONS = [
    ("km", "mi"),
    ("mi", "km"),
    ("kg", "lb"),
    ("lb", "kg"),
    ("C", "F"),
    ("F", "C"),
    ("l", "gal"),
    ("ft", "m"),
    ("in", "cm"),
    ("km/h", "mph"),
    ("h", "min"),
    ("oz", "g"),
]
UNIT_WORDS = {
    "km": "kilometers",
    "mi": "miles",
    "kg": "kilograms",
    "lb": "pounds",
    "C": "degrees Celsius",
    "F": "degrees Fahrenheit",
    "l": "liters",
    "gal": "gallons",
    "ft": "feet",
    "m": "meters",
    "in": "inches",
    "cm": "centimeters",
    "km/h": "km/h",
    "mph": "mph",
    "h": "hours",
    "min": "minutes",
    "oz": "ounces",
    "g": "grams",
}
ROUNDING = {
    0: [" Round to a whole number.", " No decimals, please."],
    1: [" Round to 1 decimal place.", " (one decimal)"],
    2: [" Round to 2 decimal places.", " (two decimals)"],
}
"""How a user asks for the optional `precision` of convert_units (default 6)."""
CITIES = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Toronto", "Nairobi", "Seoul", "Madrid", "Denver"]
NO_TOOL = [
    ("What is the capital of France?", "Paris"),
    ("What is the capital of Japan?", "Tokyo"),
    ("How many days are there in a week?", "7"),
    ("Who wrote Romeo and Juliet?", "Shakespeare"),
    ("What is the chemical symbol for water?", "H2O"),
    ("How many continents are there?", "7"),
    ("What color do you get by mixing blue and yellow?", "green"),
    ("What is the largest planet in our solar system?", "Jupiter"),
    ("How many minutes are in an hour?", "60"),
    ("What language is spoken in Brazil?", "Portuguese"),
    ("What is the capital of Italy?", "Rome"),
    ("What is the capital of Canada?", "Ottawa"),
    ("Which planet is known as the Red Planet?", "Mars"),
    ("How many legs does a spider have?", "8"),
    ("What is the boiling point of water at sea level in Celsius?", "100"),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci"),
    ("What is the longest river in Africa?", "Nile"),
    ("How many sides does a hexagon have?", "6"),
    ("What gas do plants absorb from the air?", "carbon dioxide"),
    ("What is the currency of Japan?", "yen"),
    ("In which continent is Kenya?", "Africa"),
    ("What is the freezing point of water in Fahrenheit?", "32"),
    ("How many hours are in a day?", "24"),
    ("What is the opposite of 'ancient'?", "modern"),
    ("Which ocean is the largest?", "Pacific"),
    ("What do bees make?", "honey"),
    ("How many strings does a standard guitar have?", "6"),
    ("What is the capital of Australia?", "Canberra"),
    ("Which animal is known as the king of the jungle?", "lion"),
    ("What is the main language of Mexico?", "Spanish"),
    ("What is the capital of Kenya?", "Nairobi"),
    ("How many days are there in a leap year?", "366"),
    ("Who wrote Hamlet?", "Shakespeare"),
    ("What is the chemical symbol for iron?", "Fe"),
    ("How many legs does an insect have?", "6"),
    ("Which planet has the most famous rings?", "Saturn"),
    ("What is the capital of Portugal?", "Lisbon"),
    ("What is the largest ocean animal?", "blue whale"),
    ("How many sides does a triangle have?", "3"),
    ("Which country is home to the kangaroo?", "Australia"),
    ("What is the capital of Peru?", "Lima"),
    ("What do caterpillars turn into?", "butterflies"),
    ("How many seconds are in a minute?", "60"),
    ("What is the capital of South Korea?", "Seoul"),
]
"""Knowledge questions: each is asked once in the pool (`no_tool`'s key), so no split repeats another's."""
CHAT = {
    "Hi there!": "Hello! How can I help you today?",
    "Thanks a lot for your help!": "You're welcome, happy to help!",
    "Good morning, how are you?": "Good morning! I'm doing well. What can I do for you?",
    "That's all I needed, bye!": "Glad I could help. Goodbye!",
}


def _day(rng: random.Random) -> str:
    return (date(2024, 1, 1) + timedelta(days=rng.randint(0, 1500))).isoformat()


def _expr(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 999), rng.randint(2, 99), rng.randint(2, 20)
    return rng.choice(
        [f"{a} * {b}", f"{a} + {b} * {c}", f"({a} - {b}) / {c}", f"{b} ** 2 + {c}", f"sqrt({b * b}) + {a}"]
    )


def calc_intent() -> Intent:
    return Intent(
        "calc",
        ["What is {expr}?", "Compute {expr} please.", "Can you work out {expr} for me?", "calculate {expr}"],
        lambda r: {"expr": _expr(r)},
        lambda s: one_call("calculator", expression=s["expr"]),
        lambda s, res: [fmt_number(res[0]["result"])],
        lambda f, res: f"The result is {f[0]}.",
        ["calculator"],
    )


def _optional(r: random.Random, share: float, values: list) -> object | None:
    """A non-default value for an optional argument in `share` of the tasks, else None (left out)."""
    return r.choice(values) if r.random() < share else None


def _given(**args) -> dict:
    """The arguments that were given (optional ones left out of the gold call when None)."""
    return {k: v for k, v in args.items() if v is not None}


def convert_intent() -> Intent:
    def sample(r: random.Random):
        src, dst = r.choice(CONVERSIONS)
        digits = _optional(r, 0.3, [0, 1, 2])
        rounding = "" if digits is None else r.choice(ROUNDING[digits])
        return {
            "value": r.choice([1, 2.5, 5, 10, 12, 20, 37, 42, 100, 250]),
            "src": src,
            "dst": dst,
            "src_w": UNIT_WORDS[src],
            "dst_w": UNIT_WORDS[dst],
            "digits": digits,
            "round_q": rounding,
        }

    return Intent(
        "convert",
        [
            "How many {dst_w} is {value} {src_w}?{round_q}",
            "Convert {value} {src_w} to {dst_w}.{round_q}",
            "What's {value} {src_w} in {dst_w}?{round_q}",
            "I need {value} {src_w} expressed in {dst_w}.{round_q}",
        ],
        sample,
        lambda s: [
            GoldCall(
                name="convert_units",
                step=0,
                arguments=_given(value=s["value"], from_unit=s["src"], to_unit=s["dst"], precision=s["digits"]),
            )
        ],
        lambda s, res: [fmt_number(res[0]["result"])],
        lambda f, res: f"That is {f[0]} {UNIT_WORDS[res[0]['to_unit']]}.",
        ["convert_units"],
    )


def timezone_intent() -> Intent:
    def sample(r: random.Random):
        a, b = r.sample(sorted(CITY_ZONES), 2)
        return {"a": a, "b": b, "day": _day(r), "hm": f"{r.randint(0, 23):02d}:{r.choice(['00', '15', '30', '45'])}"}

    return Intent(
        "timezone",
        [
            "It is {hm} on {day} in {a}. What time is it in {b}?",
            "When it's {hm} in {a} on {day}, what's the time in {b}?",
            "Convert {day} {hm} {a} time to {b} time.",
        ],
        sample,
        lambda s: one_call(
            "convert_timezone", datetime=f"{s['day']}T{s['hm']}", from_tz=CITY_ZONES[s["a"]], to_tz=CITY_ZONES[s["b"]]
        ),
        lambda s, res: [res[0]["datetime"][11:16]],
        lambda f, res: f"It will be {f[0]} there ({res[0]['datetime'][:10]}, UTC{res[0]['utc_offset']}).",
        ["convert_timezone"],
    )


def days_between_intent() -> Intent:
    return Intent(
        "days_between",
        [
            "How many days are there between {d1} and {d2}?",
            "Count the days from {d1} to {d2}.",
            "How long is it from {d1} until {d2}, in days?",
        ],
        lambda r: dict(zip(("d1", "d2"), sorted([_day(r), _day(r)]))),
        lambda s: one_call("days_between", start_date=s["d1"], end_date=s["d2"]),
        lambda s, res: [str(res[0]["days"])],
        lambda f, res: f"There are {f[0]} days between those dates.",
        ["days_between"],
    )


def add_days_intent() -> Intent:
    return Intent(
        "add_days",
        [
            "What date is {n} days after {d}?",
            "If I start on {d}, what is the date {n} days later?",
            "Add {n} days to {d}.",
        ],
        lambda r: {"d": _day(r), "n": r.randint(3, 400)},
        lambda s: one_call("add_days", date=s["d"], days=s["n"]),
        lambda s, res: [res[0]["date"]],
        lambda f, res: f"That is {f[0]}, a {res[0]['weekday']}.",
        ["add_days"],
    )


def weekday_intent() -> Intent:
    return Intent(
        "weekday",
        [
            "What day of the week is {d}?",
            "Which weekday falls on {d}?",
            "Is {d} a weekday or weekend? Which day is it?",
        ],
        lambda r: {"d": _day(r)},
        lambda s: one_call("day_of_week", date=s["d"]),
        lambda s, res: [res[0]["weekday"]],
        lambda f, res: f"{res[0]['date']} is a {f[0]}.",
        ["day_of_week"],
    )


def weekday_pair_intent() -> Intent:
    """Parallel: two independent calls in one step."""
    return Intent(
        "weekday_pair",
        ["What days of the week are {d1} and {d2}?", "Tell me the weekdays of {d1} and of {d2}."],
        lambda r: {"d1": _day(r), "d2": _day(r)},
        lambda s: parallel_calls("day_of_week", "date", s["d1"], s["d2"]),
        lambda s, res: [res[0]["weekday"], res[1]["weekday"]],
        lambda f, res: f"{res[0]['date']} is a {f[0]} and {res[1]['date']} is a {f[1]}.",
        ["day_of_week"],
    )


def percentage_intent() -> Intent:
    return Intent(
        "percentage",
        ["What is {p}% of {v}?", "Calculate {p} percent of {v}.", "How much is {p}% of {v}?"],
        lambda r: {"p": r.choice([5, 10, 12.5, 15, 18, 20, 25, 33, 40, 75]), "v": r.randint(20, 5000)},
        lambda s: one_call("percentage", percent=s["p"], value=s["v"]),
        lambda s, res: [fmt_number(res[0]["result"])],
        lambda f, res: f"It comes to {f[0]}.",
        ["percentage"],
    )


def split_even_intent() -> Intent:
    """Optional argument left out: no tip mentioned, so the gold call omits `tip_percent` (default 0)."""
    return Intent(
        "split_bill_even",
        [
            "Split a ${a} bill evenly between {n} people.",
            "We are {n} people and the bill is ${a}. What does each of us pay?",
            "Divide ${a} among {n} friends, no tip.",
        ],
        lambda r: {"a": r.choice([36, 54.6, 80, 99.9, 145, 210, 320]), "n": r.randint(2, 8)},
        lambda s: one_call("split_bill", amount=s["a"], people=s["n"]),
        lambda s, res: [fmt_number(res[0]["per_person"])],
        lambda f, res: f"Each person pays ${f[0]}.",
        ["split_bill"],
        per_task=15,
    )


def tip_total_intent() -> Intent:
    """Optional argument left out: one payer, so the gold call omits `people` (default 1)."""
    return Intent(
        "split_bill_tip_only",
        [
            "What's the total on a ${a} bill with a {t}% tip?",
            "Add a {t}% tip to ${a}. Total?",
            "I'm paying ${a} alone plus a {t}% tip; how much altogether?",
        ],
        lambda r: {"a": r.choice([24, 38.5, 61, 75.25, 112, 150]), "t": r.choice([10, 12, 15, 18, 20, 22])},
        lambda s: one_call("split_bill", amount=s["a"], tip_percent=s["t"]),
        lambda s, res: [fmt_number(res[0]["total"])],
        lambda f, res: f"The total comes to ${f[0]} (tip ${fmt_number(res[0]['tip'])}).",
        ["split_bill"],
        per_task=15,
    )


def split_bill_intent() -> Intent:
    return Intent(
        "split_bill",
        [
            "Our bill is ${a}. With a {t}% tip split between {n} people, how much does each pay?",
            "Split a ${a} check {n} ways including a {t}% tip.",
            "We owe ${a}; add {t}% tip and divide by {n}. What's each share?",
        ],
        lambda r: {
            "a": r.choice([42, 58.5, 77, 96.4, 120, 180, 260]),
            "t": r.choice([10, 15, 18, 20]),
            "n": r.randint(2, 6),
        },
        lambda s: one_call("split_bill", amount=s["a"], tip_percent=s["t"], people=s["n"]),
        lambda s, res: [fmt_number(res[0]["per_person"])],
        lambda f, res: f"Each person pays ${f[0]} (total ${fmt_number(res[0]['total'])}).",
        ["split_bill"],
    )


def weeks_between_intent() -> Intent:
    """Sequence: the second call's argument comes from the first call's result."""
    return Intent(
        "weeks_between",
        ["How many weeks are there between {d1} and {d2}?", "Roughly how many weeks from {d1} to {d2}?"],
        lambda r: dict(zip(("d1", "d2"), sorted([_day(r), _day(r)]))),
        lambda s: [
            GoldCall(name="days_between", arguments={"start_date": s["d1"], "end_date": s["d2"]}, step=0),
            GoldCall(name="calculator", arguments={"expression": f"{_days(s)} / 7"}, step=1),
        ],
        lambda s, res: [fmt_number(res[1]["result"])],
        lambda f, res: f"That is {res[0]['days']} days, about {f[0]} weeks.",
        ["days_between", "calculator"],
    )


def _days(slots) -> int:
    return (date.fromisoformat(slots["d2"]) - date.fromisoformat(slots["d1"])).days


def weather_intent() -> Intent:
    """`unit` is optional (default celsius): passed only when the user names a unit."""

    def sample(r: random.Random):
        unit = _optional(r, 0.4, ["fahrenheit", "fahrenheit", "fahrenheit", "celsius"])
        return {
            "city": r.choice(CITIES),
            "unit": unit,
            "unit_q": ""
            if unit is None
            else r.choice([" Use {}, please.", " Temperatures in {}."]).format(unit.title()),
        }

    def facts(s, res):
        # The simulated result is synthesised from the schema alone (its `city` is any city): the reply states
        # the city asked about and the temperature the tool returned.
        return [s["city"], fmt_number(res[0]["temperature"])]

    def answer(f, res, query=""):
        asked = {"city": f[0], "unit": "fahrenheit" if "Fahrenheit" in query else "celsius"}
        return f"Current weather in {f[0]} — {summarise({**res[0], **asked})}."

    return Intent(
        "weather",
        [
            "What's the weather like in {city}?{unit_q}",
            "Is it warm in {city} right now?{unit_q}",
            "Weather report for {city}, please.{unit_q}",
        ],
        sample,
        lambda s: [GoldCall(name="get_weather", arguments=_given(city=s["city"], unit=s["unit"]), step=0)],
        facts,
        answer,
        ["get_weather"],
    )


def event_intent() -> Intent:
    """`duration_minutes` is optional (default 60): passed only when the user gives another length."""

    def event_sample(r: random.Random):
        minutes = _optional(r, 0.35, [15, 30, 45, 90, 120])
        return {
            "title": r.choice(["Dentist", "Team sync", "Gym", "Call mom", "Project review"]),
            "d": _day(r),
            "minutes": minutes,
            "dur_q": "" if minutes is None else f", {minutes} minutes long",
        }

    return Intent(
        "create_event",
        ["Put '{title}' in my calendar on {d}{dur_q}.", "Create a calendar event called {title} for {d}{dur_q}."],
        event_sample,
        lambda s: [
            GoldCall(
                name="create_calendar_event",
                step=0,
                arguments=_given(title=s["title"], date=s["d"], duration_minutes=s["minutes"]),
            )
        ],
        _event_facts,
        _event_answer,
        ["create_calendar_event"],
    )


def _event_facts(slots, results) -> list[str]:
    """The event id the tool returned, and the title and date asked for (the synthesised result's own title
    and date are any text: the reply confirms what was requested)."""
    return [str(results[0]["event_id"]), slots["title"], slots["d"]]


def _event_answer(facts, results) -> str:
    event_id, title, day = facts
    return f"Done — '{title}' is in your calendar on {day} (event id {event_id}, status {results[0]['status']})."


def no_tool_intent() -> Intent:
    def sample(r: random.Random):
        q, a = r.choice(NO_TOOL + [(c, "") for c in CHAT])
        return {"q": q, "a": a, "lead": r.choice(["", "Quick question: ", "Hey, ", "I was wondering: "])}

    return Intent(
        "no_tool",
        ["{lead}{q}"],
        sample,
        lambda s: [],
        lambda s, res: [s["a"]] if s["a"] else [],
        lambda f, res, query="": f"{f[0]}." if f else _chat_reply(query),
        [],
        per_task=40,
        key=lambda s: s["q"],
    )


def _chat_reply(query: str) -> str:
    return next((reply for text, reply in CHAT.items() if query.endswith(text)), "Happy to help!")


def everyday_intents() -> list[Intent]:
    tool_intents = [
        calc_intent(),
        convert_intent(),
        timezone_intent(),
        days_between_intent(),
        add_days_intent(),
        weekday_intent(),
        weekday_pair_intent(),
        percentage_intent(),
        split_bill_intent(),
        split_even_intent(),
        tip_total_intent(),
        weeks_between_intent(),
        weather_intent(),
        event_intent(),
    ]
    return [*tool_intents, no_tool_intent(), *abstention_intents(tool_intents)]
