"""The everyday pack's `novel` split: whole intents, tools and phrasings that no train task (so neither the warm
start's demonstrations nor the feed) ever uses. It measures whether tool use generalises beyond the templates
trained on, where the `test` split (same templates) measures fit.

Tools: the real `sim.real.everyday_novel` ones (loans, compound interest, text statistics, Roman numerals, ISO
weeks, number statistics) and the simulated `NOVEL_SIMULATED_TOOLS` (air quality, flight status, to-do items,
a dictionary used only as a near miss). Intents: single calls (some with an optional argument), parallel calls,
knowledge questions that need no tool, and requests no offered tool can serve with new near-miss tools.
"""

from __future__ import annotations

import random

from sim.real.everyday_novel import NOVEL_TOOL_NAMES
from sim.tasks.abstention import unsupported_intent
from sim.tasks.catalog import NOVEL_SIMULATED_TOOLS
from sim.tasks.everyday import _day, _given, _optional
from sim.tasks.everyday_abstention import ALWAYS_BANNED, Unsupported, with_slots
from sim.tasks.intents import Intent, fmt_number, one_call, parallel_calls
from slca.contracts import GoldCall

NOVEL_TOOLS = NOVEL_TOOL_NAMES | {t["function"]["name"] for t in NOVEL_SIMULATED_TOOLS}
"""Every tool only novel tasks may offer."""
PER_TASK = 10
AIR_CITIES = ["Reykjavik", "Hanoi", "Lisbon", "Warsaw", "Bogota", "Dublin", "Santiago", "Jakarta", "Vienna", "Auckland"]
AIRLINES = ["BA", "LH", "AF", "QF", "NH", "UA", "EK", "KL"]
WORDS = [
    "river",
    "quiet",
    "garden",
    "orange",
    "window",
    "yellow",
    "music",
    "little",
    "morning",
    "paper",
    "silver",
    "mountain",
    "coffee",
    "lantern",
    "brave",
    "cloud",
    "thunder",
    "violet",
    "ancient",
    "harbor",
]
TODOS = [
    "renew my passport",
    "buy a birthday gift",
    "file my taxes",
    "water the plants",
    "book a haircut",
    "return the library books",
    "service the bike",
    "call the landlord",
]
COMPOUNDING = {12: "compounded monthly", 4: "compounded quarterly", 365: "compounded daily"}
KNOWLEDGE = [
    ("What is the capital of Norway?", "Oslo"),
    ("How many players does a soccer team field?", "11"),
    ("What is the chemical symbol for gold?", "Au"),
    ("Who developed the theory of relativity?", "Einstein"),
    ("How many bones are in the adult human body?", "206"),
    ("What is the tallest mountain on Earth?", "Everest"),
    ("Which planet is closest to the Sun?", "Mercury"),
    ("What is the smallest prime number?", "2"),
    ("Which language is spoken in Argentina?", "Spanish"),
    ("What is the capital of Egypt?", "Cairo"),
    ("Who wrote Pride and Prejudice?", "Jane Austen"),
    ("What is the hardest natural substance?", "diamond"),
    ("Which metal is liquid at room temperature?", "mercury"),
    ("What is the capital of Spain?", "Madrid"),
    ("Who was the first person to walk on the Moon?", "Neil Armstrong"),
    ("In which country are the pyramids of Giza?", "Egypt"),
    ("Which instrument has 88 keys?", "piano"),
    ("What is the main ingredient of guacamole?", "avocado"),
    ("Who painted The Starry Night?", "Van Gogh"),
    ("How many planets are in our solar system?", "8"),
    ("What is the currency of the United Kingdom?", "pound"),
    ("How many wheels does a tricycle have?", "3"),
    ("Which bird is a symbol of peace?", "dove"),
    ("What is the capital of Germany?", "Berlin"),
]
SLOTS = {
    "city": AIR_CITIES,
    "fn": ["BA117", "LH400", "QF12", "UA901"],
    "todo": ["TODO-311", "td_5820", "TODO-907"],
    "amt": ["5,000", "20,000", "300,000"],
    "word": ["serendipity", "quinoa", "Worcestershire", "ephemeral"],
    "n": ["1999", "2024", "1066"],
    "wk": ["14", "32", "47"],
}
REQUESTS = [
    Unsupported(
        "aqi_forecast",
        ("Will the air be clean in {city} tomorrow?", "What's the pollution forecast for {city} next week?"),
        ("get_air_quality",),
    ),
    Unsupported(
        "rebook_flight",
        ("Rebook me on a later flight than {fn}.", "Upgrade my seat on flight {fn} to business class."),
        ("get_flight_status",),
    ),
    Unsupported(
        "finish_todo", ("Mark my to-do item {todo} as done.", "Delete {todo} from my to-do list."), ("add_todo",)
    ),
    Unsupported(
        "apply_loan",
        (
            "Apply for a ${amt} personal loan at my bank for me.",
            "Check whether my bank would approve a mortgage for me.",
        ),
        ("loan_payment", "compound_interest"),
    ),
    Unsupported(
        "open_savings",
        ("Open a high-yield savings account for me.", "Move ${amt} into a certificate of deposit."),
        ("compound_interest",),
    ),
    Unsupported(
        "pronounce",
        ("Play the pronunciation of '{word}' out loud.", "Record me saying '{word}' and rate my accent."),
        ("lookup_definition", "text_stats"),
    ),
    Unsupported(
        "scan_receipt",
        ("Scan the receipt I just photographed and add up the items.", "Read the numbers off the picture of my bill."),
        ("number_stats", "text_stats"),
    ),
    Unsupported(
        "engrave",
        ("Order a watch engraved with {n} in Roman numerals.", "Book me a tattoo studio to ink {n} in Roman numerals."),
        ("roman_numeral",),
    ),
    Unsupported(
        "week_room",
        ("Book a meeting room for all of week {wk}.", "Block out week {wk} in my team's shared calendar."),
        ("iso_week",),
        ("create_calendar_event",),
    ),  # an all-week event is close enough: never offered
]


def loan_intent() -> Intent:
    return Intent(
        "novel_loan",
        [
            "I'm borrowing ${p} at {r}% a year for {y} years. What will my monthly payment be?",
            "What's the monthly installment on a ${p} loan over {y} years at {r}% interest?",
            "Mortgage question: ${p}, {r}% annual rate, {y}-year term. Monthly cost?",
        ],
        lambda r: {
            "p": r.choice([5000, 12000, 25000, 180000, 250000, 320000]),
            "r": r.choice([3.5, 4.2, 5, 6.75, 7.9]),
            "y": r.choice([3, 5, 10, 15, 30]),
        },
        lambda s: one_call("loan_payment", principal=s["p"], annual_rate_percent=s["r"], years=s["y"]),
        lambda s, res: [fmt_number(res[0]["monthly_payment"])],
        lambda f, res: f"You would pay ${f[0]} a month (${fmt_number(res[0]['total_paid'])} in total).",
        ["loan_payment"],
        PER_TASK,
    )


def interest_intent() -> Intent:
    """`compounds_per_year` is optional (default 1, yearly): passed only when the request names another."""

    def sample(r: random.Random):
        per_year = _optional(r, 0.4, sorted(COMPOUNDING))
        return {
            "p": r.choice([750, 1000, 2500, 5000, 10000]),
            "r": r.choice([2, 3.5, 4, 5.25, 7]),
            "y": r.choice([2, 5, 10, 20]),
            "k": per_year,
            "kq": "" if per_year is None else f", {COMPOUNDING[per_year]}",
        }

    return Intent(
        "novel_interest",
        [
            "If I put ${p} in savings at {r}% for {y} years{kq}, how much will I have?",
            "Future value of ${p} invested at {r}% over {y} years{kq}?",
            "I deposit ${p} earning {r}% a year{kq}. What's it worth after {y} years?",
        ],
        sample,
        lambda s: [
            GoldCall(
                name="compound_interest",
                step=0,
                arguments=_given(principal=s["p"], rate_percent=s["r"], years=s["y"], compounds_per_year=s["k"]),
            )
        ],
        lambda s, res: [fmt_number(res[0]["amount"])],
        lambda f, res: f"It will grow to ${f[0]} (${fmt_number(res[0]['interest'])} of interest).",
        ["compound_interest"],
        PER_TASK,
    )


def word_count_intent() -> Intent:
    def sample(r: random.Random):
        return {"text": " ".join(r.sample(WORDS, r.randint(4, 11))).capitalize() + "."}

    return Intent(
        "novel_word_count",
        ['How many words does this sentence have: "{text}"', 'Count the words in "{text}"', 'Word count for: "{text}"'],
        sample,
        lambda s: one_call("text_stats", text=s["text"]),
        lambda s, res: [f"{res[0]['words']} words"],
        lambda f, res: f"That sentence has {f[0]} ({res[0]['characters']} characters).",
        ["text_stats"],
        PER_TASK,
    )


def roman_intent() -> Intent:
    return Intent(
        "novel_roman",
        ["Write {n} in Roman numerals.", "What is {n} as a Roman numeral?", "How would the Romans write {n}?"],
        lambda r: {"n": r.randint(1, 3999)},
        lambda s: one_call("roman_numeral", number=s["n"]),
        lambda s, res: [res[0]["roman"]],
        lambda f, res: f"{res[0]['number']} is {f[0]} in Roman numerals.",
        ["roman_numeral"],
        PER_TASK,
    )


def iso_week_pair_intent() -> Intent:
    """Parallel: two independent calls in one step."""
    return Intent(
        "novel_week_pair",
        ["Which ISO week numbers do {d1} and {d2} fall in?", "Give me the calendar week of {d1} and of {d2}."],
        lambda r: {"d1": _day(r), "d2": _day(r)},
        lambda s: parallel_calls("iso_week", "date", s["d1"], s["d2"]),
        lambda s, res: [f"week {res[0]['week']}", f"week {res[1]['week']}"],
        lambda f, res: (
            f"{res[0]['date']} falls in ISO {f[0]} of {res[0]['iso_year']}, and {res[1]['date']} "
            f"in ISO {f[1]} of {res[1]['iso_year']}."
        ),
        ["iso_week"],
        PER_TASK,
    )


def stats_intent() -> Intent:
    """`decimals` is optional (default 2): passed only when the request names another rounding."""

    def sample(r: random.Random):
        digits = _optional(r, 0.35, [0, 1, 3])
        numbers = r.sample(range(1, 100), r.randint(4, 7))
        rounding = "" if digits is None else (" As a whole number." if digits == 0 else f" Round to {digits} decimals.")
        return {"numbers": numbers, "nums": ", ".join(map(str, numbers)), "k": digits, "kq": rounding}

    return Intent(
        "novel_stats",
        [
            "What's the average of {nums}?{kq}",
            "Find the mean of these numbers: {nums}.{kq}",
            "I scored {nums} on my quizzes. What's my average?{kq}",
        ],
        sample,
        lambda s: [GoldCall(name="number_stats", step=0, arguments=_given(numbers=s["numbers"], decimals=s["k"]))],
        lambda s, res: [fmt_number(res[0]["mean"])],
        lambda f, res: f"The mean is {f[0]} (median {fmt_number(res[0]['median'])}).",
        ["number_stats"],
        PER_TASK,
    )


def air_intent() -> Intent:
    return Intent(
        "novel_air",
        [
            "How clean is the air in {city} right now?",
            "What's the AQI in {city} today?",
            "Is the air quality OK for a run in {city}?",
        ],
        lambda r: {"city": r.choice(AIR_CITIES)},
        lambda s: one_call("get_air_quality", city=s["city"]),
        lambda s, res: [s["city"], str(res[0]["aqi"])],
        lambda f, res: f"The air quality index in {f[0]} is {f[1]} ({res[0]['category']}).",
        ["get_air_quality"],
        PER_TASK,
    )


def air_pair_intent() -> Intent:
    """Parallel: one call per city in one step."""
    return Intent(
        "novel_air_pair",
        ["Compare the air quality of {a} and {b}.", "Which has cleaner air right now, {a} or {b}?"],
        lambda r: dict(zip(("a", "b"), r.sample(AIR_CITIES, 2))),
        lambda s: parallel_calls("get_air_quality", "city", s["a"], s["b"]),
        lambda s, res: [s["a"], str(res[0]["aqi"]), s["b"], str(res[1]["aqi"])],
        lambda f, res: f"The air quality index is {f[1]} in {f[0]} and {f[3]} in {f[2]} (lower is cleaner).",
        ["get_air_quality"],
        PER_TASK,
    )


def flight_intent() -> Intent:
    return Intent(
        "novel_flight",
        ["Is flight {fn} on time?", "What's the status of flight {fn}?", "Has {fn} left yet?"],
        lambda r: {"fn": f"{r.choice(AIRLINES)}{r.randint(10, 999)}"},
        lambda s: one_call("get_flight_status", flight_number=s["fn"]),
        lambda s, res: [s["fn"], res[0]["status"]],
        lambda f, res: f"Flight {f[0]} is {f[1]} (gate {res[0]['gate']}).",
        ["get_flight_status"],
        PER_TASK,
    )


def todo_intent() -> Intent:
    """`priority` is optional (default normal): passed only when the request names one."""

    def sample(r: random.Random):
        priority = _optional(r, 0.35, ["high", "low"])
        return {
            "task": r.choice(TODOS),
            "d": _day(r),
            "pr": priority,
            "pq": "" if priority is None else f" Make it {priority} priority.",
        }

    def answer(facts, results):
        todo_id, task, due = facts
        return f"Added '{task}' to your to-do list, due {due} (item {todo_id})."

    return Intent(
        "novel_todo",
        [
            "Put '{task}' on my to-do list, due {d}.{pq}",
            "New to-do: {task}, due {d}.{pq}",
            "Add a to-do to {task} by {d}.{pq}",
        ],
        sample,
        lambda s: [
            GoldCall(name="add_todo", step=0, arguments=_given(task=s["task"], due_date=s["d"], priority=s["pr"]))
        ],
        lambda s, res: [str(res[0]["todo_id"]), s["task"], s["d"]],
        answer,
        ["add_todo"],
        PER_TASK,
    )


def knowledge_intent() -> Intent:
    def sample(r: random.Random):
        q, a = r.choice(KNOWLEDGE)
        return {
            "q": q,
            "a": a,
            "lead": r.choice(["", "Do you happen to know this: ", "Trivia time! ", "Settle a debate: "]),
        }

    return Intent(
        "novel_knowledge",
        ["{lead}{q}"],
        sample,
        lambda s: [],
        lambda s, res: [s["a"]],
        lambda f, res: f"{f[0]}.",
        [],
        per_task=14,
        key=lambda s: s["q"],
    )


def novel_intents() -> list[Intent]:
    """The novel split's intents (drawn after the train/test ones, never repeating one of their requests)."""
    requests = [with_slots(r, SLOTS) for r in REQUESTS]
    return [
        loan_intent(),
        interest_intent(),
        word_count_intent(),
        roman_intent(),
        iso_week_pair_intent(),
        stats_intent(),
        air_intent(),
        air_pair_intent(),
        flight_intent(),
        todo_intent(),
        knowledge_intent(),
        unsupported_intent(requests, ALWAYS_BANNED, per_task=18, name="novel_unsupported"),
    ]
