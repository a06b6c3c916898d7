"""τ² airline and retail task packs: read-only requests with values taken from the domain databases."""

from __future__ import annotations

import random
from typing import Any

from sim.real.tau2 import db_json
from sim.tasks.intents import Intent, lookup_intent, one_call, parallel_calls
from slca.contracts import GoldCall

THANKS = {
    "Thanks, that's everything.": "You're welcome! Have a great day.",
    "Hello, I have a question about my account.": "Hello! I'd be glad to help. What would you like to know?",
    "Ok, bye.": "Goodbye, and thank you for contacting us!",
}


def _no_tool() -> Intent:
    return Intent(
        "no_tool",
        ["{q}"],
        lambda r: {"q": r.choice(sorted(THANKS))},
        lambda s: [],
        lambda s, res: [],
        lambda f, res, query="": THANKS.get(query, "Happy to help!"),
        [],
        per_task=15,
    )


def airline_intents() -> list[Intent]:
    db = db_json("airline")
    reservations, users = sorted(db["reservations"]), sorted(db["users"])
    flight_days = sorted((fn, d) for fn, f in db["flights"].items() for d in f["dates"])
    routes = sorted({(f["origin"], f["destination"]) for f in db["flights"].values()})
    days = sorted({d for f in db["flights"].values() for d in f["dates"]})
    with_res = [u for u in users if db["users"][u]["reservations"]]

    def flight_sample(r: random.Random) -> dict[str, Any]:
        fn, day = r.choice(flight_days)
        return {"fn": fn, "day": day}

    def route_sample(r: random.Random) -> dict[str, Any]:
        o, d = r.choice(routes)
        return {"o": o, "d": d, "day": r.choice(days)}

    def reservation(name: str, phrasings: list[str], facts, answer) -> Intent:
        return lookup_intent(
            name, phrasings, "rid", reservations, "get_reservation_details", "reservation_id", facts, answer
        )

    def flights_answer(f, res):
        return f"I found {len(res[0])} direct flights" + (f", including {', '.join(f)}." if f else ".")

    return [
        reservation(
            "reservation_route",
            [
                "Can you pull up reservation {rid}? Where does it fly from and to?",
                "Where is booking {rid} going from and to?",
                "What's the route of reservation {rid}?",
            ],
            lambda res: [res["origin"], res["destination"]],
            lambda f, res: f"Reservation {res['reservation_id']} goes from {f[0]} to {f[1]}.",
        ),
        reservation(
            "reservation_cabin",
            ["Which cabin is reservation {rid} booked in?", "What class of service is on booking {rid}?"],
            lambda res: [res["cabin"]],
            lambda f, res: f"It is booked in {f[0].replace('_', ' ')} ({f[0]}).",
        ),
        lookup_intent(
            "user_email",
            ["What e-mail address do you have for user {uid}?", "My user id is {uid}. Which e-mail is on file?"],
            "uid",
            users,
            "get_user_details",
            "user_id",
            lambda res: [res["email"]],
            lambda f, res: f"The e-mail on file is {f[0]}.",
        ),
        Intent(
            "flight_status",
            [
                "What's the status of flight {fn} on {day}?",
                "Is flight {fn} on {day} on time?",
                "Check flight {fn} for {day}, please.",
            ],
            flight_sample,
            lambda s: one_call("get_flight_status", flight_number=s["fn"], date=s["day"]),
            lambda s, res: [res[0]],
            lambda f, res: f"The flight's status is: {f[0]}.",
            ["get_flight_status"],
        ),
        Intent(
            "direct_flights",
            ["Find me direct flights from {o} to {d} on {day}.", "Any nonstop flights {o} to {d} on {day}?"],
            route_sample,
            lambda s: one_call("search_direct_flight", origin=s["o"], destination=s["d"], date=s["day"]),
            lambda s, res: [x["flight_number"] for x in res[0][:2]],
            flights_answer,
            ["search_direct_flight"],
        ),
        Intent(
            "first_trip",
            [
                "I'm user {uid}. Where does my first reservation go?",
                "Look up user {uid} and tell me the destination of their first booking.",
            ],
            lambda r: {"uid": r.choice(with_res)},
            lambda s: [
                GoldCall(name="get_user_details", arguments={"user_id": s["uid"]}, step=0),
                GoldCall(
                    name="get_reservation_details",
                    arguments={"reservation_id": db["users"][s["uid"]]["reservations"][0]},
                    step=1,
                ),
            ],
            lambda s, res: [res[1]["destination"]],
            lambda f, res: f"Your first reservation, {res[1]['reservation_id']}, goes to {f[0]}.",
            ["get_user_details", "get_reservation_details"],
        ),
        Intent(
            "two_cabins",
            [
                "Compare reservations {r1} and {r2}: which cabins are they in?",
                "What cabins are bookings {r1} and {r2}?",
            ],
            lambda r: dict(zip(("r1", "r2"), r.sample(reservations, 2))),
            lambda s: parallel_calls("get_reservation_details", "reservation_id", s["r1"], s["r2"]),
            lambda s, res: [res[0]["cabin"], res[1]["cabin"]],
            lambda f, res: f"{res[0]['reservation_id']} is in {f[0]} and {res[1]['reservation_id']} is in {f[1]}.",
            ["get_reservation_details"],
        ),
        _no_tool(),
    ]


def retail_intents() -> list[Intent]:
    db = db_json("retail")
    orders, users, products = sorted(db["orders"]), sorted(db["users"]), sorted(db["products"])

    def person(r: random.Random) -> dict[str, Any]:
        uid = r.choice(users)
        u = db["users"][uid]
        return {
            "uid": uid,
            "first": u["name"]["first_name"],
            "last": u["name"]["last_name"],
            "zip": u["address"]["zip"],
            "email": u["email"],
        }

    return [
        lookup_intent(
            "order_status",
            [
                "What's the status of order {oid}?",
                "Has my order {oid} shipped yet?",
                "Can you check order {oid} for me?",
            ],
            "oid",
            orders,
            "get_order_details",
            "order_id",
            lambda res: [res["status"]],
            lambda f, res: f"Order {res['order_id']} is {f[0]}.",
        ),
        Intent(
            "user_by_email",
            ["What's the user id for the account with e-mail {email}?", "Find my account: {email}."],
            person,
            lambda s: one_call("find_user_id_by_email", email=s["email"]),
            lambda s, res: [res[0]],
            lambda f, res: f"The account's user id is {f[0]}.",
            ["find_user_id_by_email"],
        ),
        Intent(
            "user_by_name_zip",
            [
                "I'm {first} {last}, zip code {zip}. What's my user id?",
                "Look up the user {first} {last} living in zip {zip}.",
            ],
            person,
            lambda s: one_call("find_user_id_by_name_zip", first_name=s["first"], last_name=s["last"], zip=s["zip"]),
            lambda s, res: [res[0]],
            lambda f, res: f"Your user id is {f[0]}.",
            ["find_user_id_by_name_zip"],
        ),
        lookup_intent(
            "product_name",
            ["What product has id {pid}?", "Tell me about product {pid}: what is it?"],
            "pid",
            products,
            "get_product_details",
            "product_id",
            lambda res: [res["name"]],
            lambda f, res: f"Product {res['product_id']} is a {f[0]}.",
        ),
        Intent(
            "user_city",
            [
                "My e-mail is {email}. Which city is my address in?",
                "Using the e-mail {email}, find the account and tell me its city.",
            ],
            person,
            lambda s: [
                GoldCall(name="find_user_id_by_email", arguments={"email": s["email"]}, step=0),
                GoldCall(name="get_user_details", arguments={"user_id": s["uid"]}, step=1),
            ],
            lambda s, res: [res[1]["address"]["city"]],
            lambda f, res: f"The address on the account is in {f[0]}.",
            ["find_user_id_by_email", "get_user_details"],
        ),
        Intent(
            "two_orders",
            ["What are the statuses of orders {o1} and {o2}?", "Check both orders {o1} and {o2}."],
            lambda r: dict(zip(("o1", "o2"), r.sample(orders, 2))),
            lambda s: parallel_calls("get_order_details", "order_id", s["o1"], s["o2"]),
            lambda s, res: [res[0]["status"], res[1]["status"]],
            lambda f, res: f"Order {res[0]['order_id']} is {f[0]} and order {res[1]['order_id']} is {f[1]}.",
            ["get_order_details"],
        ),
        _no_tool(),
    ]
