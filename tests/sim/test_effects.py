"""What a state-changing call does inside the object it names (`sim.effects`) and the duplicate-creation rule
(`sim.rules`), on small hand-written tools: rows a request stores, parts it names and replaces, refunds of a
cancellation, a second identical booking refused. Later reads answer from the changed state."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.settings import SimSettings

PROVIDER = make_provider(SimSettings(cache=False, real_packs=[]), None, CollectorRegistry())

PAYMENT = {
    "type": "object",
    "properties": {"payment_id": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["payment_id", "amount"],
}
TYPED_PAYMENT = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["payment", "refund"]},
        "payment_id": {"type": "string"},
        "amount": {"type": "number"},
    },
    "required": ["kind", "payment_id", "amount"],
}
LINE = {
    "type": "object",
    "properties": {"line_id": {"type": "string"}, "price": {"type": "number"}},
    "required": ["line_id", "price"],
}


def _booking(payment: dict, extra: dict | None = None) -> dict:
    return {
        "type": "object",
        "properties": {
            "booking_id": {"type": "string"},
            "status": {"type": "string", "enum": ["confirmed", "cancelled"]},
            "payment_history": {"type": "array", "items": payment},
            "lines": {"type": "array", "items": LINE},
            **(extra or {}),
        },
        "required": ["booking_id", "status", "payment_history", "lines"],
    }


def _tool(name: str, description: str, params: dict, response: dict) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": params, "required": list(params)},
            "x-response-schema": response,
        },
    }


def _tools(payment: dict = PAYMENT, cancel_text: str = "Cancel a booking.", extra: dict | None = None) -> list:
    booking = _booking(payment, extra)
    ident = {"booking_id": {"type": "string"}}
    lines = {"type": "array", "items": {"type": "string"}}
    return [
        _tool(
            "book_trip",
            "Book a trip.",
            {"origin": {"type": "string"}, "payment_methods": {"type": "array", "items": PAYMENT}},
            booking,
        ),
        _tool("get_booking", "Get a booking.", ident, booking),
        _tool("cancel_booking", cancel_text, ident, booking),
        _tool(
            "modify_booking_lines",
            "Modify lines of a booking.",
            {
                **ident,
                "line_ids": lines,
                "new_line_ids": {
                    **lines,
                    "description": "Each new line id should match the line id in the same position.",
                },
            },
            booking,
        ),
        _tool(
            "exchange_booking_lines", "Exchange lines.", {**ident, "line_ids": lines, "new_line_ids": lines}, booking
        ),
        _tool("add_note", "Add a note.", {"text": {"type": "string"}}, {"type": "object", "properties": {}}),
    ]


def _run(tools: list, calls: list[tuple[str, dict]]) -> list:
    async def run():
        episode = await PROVIDER.new_episode(tools)
        return [await episode.call(name, args) for name, args in calls]

    return asyncio.run(run())


PAYS = [{"payment_id": "card_1", "amount": 300}, {"payment_id": "gift_card_2", "amount": 50}]


def test_a_booking_stores_the_payments_it_was_given_in_its_ledger():
    [booked] = _run(_tools(), [("book_trip", {"origin": "SFO", "payment_methods": PAYS})])
    assert booked.ok and booked.content["payment_history"] == PAYS


def test_a_cancellation_refunds_every_payment_and_a_later_read_shows_it():
    async def run():
        episode = await PROVIDER.new_episode(_tools())
        booked = await episode.call("book_trip", {"origin": "SFO", "payment_methods": PAYS})
        ident = booked.content["booking_id"]
        return await episode.call("cancel_booking", {"booking_id": ident}), await episode.call(
            "get_booking", {"booking_id": ident}
        )

    cancelled, read = asyncio.run(run())
    refunds = [{"payment_id": "card_1", "amount": -300}, {"payment_id": "gift_card_2", "amount": -50}]
    assert cancelled.content["status"] == "cancelled"
    assert cancelled.content["payment_history"] == PAYS + refunds
    assert read.content["payment_history"] == PAYS + refunds


def test_a_ledger_with_a_refund_type_records_refund_rows_and_keeps_amounts():
    [cancelled] = _run(_tools(TYPED_PAYMENT), [("cancel_booking", {"booking_id": "B7"})])
    history = cancelled.content["payment_history"]
    half = len(history) // 2
    assert history and len(history) % 2 == 0
    for paid, refund in zip(history[:half], history[half:]):
        assert refund == {**paid, "kind": "refund"}


def test_a_non_refundable_cancellation_refunds_nothing():
    async def run():
        episode = await PROVIDER.new_episode(_tools(cancel_text="Cancel a booking. The fare is non-refundable."))
        booked = await episode.call("book_trip", {"origin": "SFO", "payment_methods": PAYS})
        return await episode.call("cancel_booking", {"booking_id": booked.content["booking_id"]})

    assert asyncio.run(run()).content["payment_history"] == PAYS


def test_paired_lists_replace_the_parts_they_name_and_a_later_read_shows_them():
    read, modified, again = _run(
        _tools(),
        [
            ("get_booking", {"booking_id": "B2"}),
            ("modify_booking_lines", {"booking_id": "B2", "line_ids": ["L1"], "new_line_ids": ["L9"]}),
            ("get_booking", {"booking_id": "B2"}),
        ],
    )
    before = [line["line_id"] for line in read.content["lines"]]
    after = [line["line_id"] for line in modified.content["lines"]]
    # the part the request names is in the object (it took an invented part's place), then replaced by its partner
    assert "L9" in after and "L1" not in after and len(after) == len(before)
    assert [line["line_id"] for line in again.content["lines"]] == after


def test_named_parts_are_placed_but_a_recorded_exchange_replaces_nothing():
    extra = {"exchange_lines": {"type": "array", "items": {"type": "string"}}}
    [exchanged] = _run(
        _tools(extra=extra),
        [("exchange_booking_lines", {"booking_id": "B3", "line_ids": ["L1"], "new_line_ids": ["L9"]})],
    )
    ids = [line["line_id"] for line in exchanged.content["lines"]]
    assert "L1" in ids and "L9" not in ids


def test_a_second_identical_booking_is_refused_but_other_calls_are_not():
    args = {"origin": "SFO", "payment_methods": PAYS}
    first, second, other, note, note_again = _run(
        _tools(),
        [
            ("book_trip", args),
            ("book_trip", args),
            ("book_trip", {**args, "origin": "JFK"}),
            ("add_note", {"text": "hi"}),
            ("add_note", {"text": "hi"}),
        ],
    )
    assert first.ok and other.ok and note.ok and note_again.ok
    assert second.status == 409 and "duplicate" in second.error


def test_a_created_object_starts_with_its_schema_defaults():
    status = {"anyOf": [{"const": "cancelled", "type": "string"}, {"type": "null"}], "default": None}
    booking = {**_booking(PAYMENT), "properties": {**_booking(PAYMENT)["properties"], "status": status}}
    book = _tool("book_trip", "Book a trip.", {"origin": {"type": "string"}}, booking)
    get = _tool("get_booking", "Get a booking.", {"booking_id": {"type": "string"}}, booking)
    created, read = _run([book, get], [("book_trip", {"origin": "SFO"}), ("get_booking", {"booking_id": "B5"})])
    assert created.content["status"] is None  # the synthesiser alone says 'cancelled' (the one non-null option)
    assert read.ok  # an object this episode did not create is not held to the creation's defaults


def test_a_status_the_description_names_wins_over_the_schema_default():
    booking = _booking(PAYMENT)
    booking["properties"] = {
        **booking["properties"],
        "status": {"type": "string", "enum": ["pending", "confirmed"], "default": "pending"},
    }
    text = "Book a trip. The status will be set to 'confirmed'."
    book = _tool("book_trip", text, {"origin": {"type": "string"}}, booking)
    [created] = _run([book], [("book_trip", {"origin": "SFO"})])
    assert created.content["status"] == "confirmed"


def test_a_removal_takes_the_parts_it_names_out_of_the_object():
    params = {"booking_id": {"type": "string"}, "line_ids": {"type": "array", "items": {"type": "string"}}}
    remove = _tool("remove_booking_lines", "Remove lines.", params, _booking(PAYMENT))
    tools = [*_tools(), remove]
    read = _run(tools, [("get_booking", {"booking_id": "B6"})])[0]
    first = read.content["lines"][0]["line_id"]
    _, removed, again = _run(
        tools,
        [
            ("get_booking", {"booking_id": "B6"}),
            ("remove_booking_lines", {"booking_id": "B6", "line_ids": [first]}),
            ("get_booking", {"booking_id": "B6"}),
        ],
    )
    assert first not in [line["line_id"] for line in removed.content["lines"]]
    assert [line["line_id"] for line in again.content["lines"]] == [
        line["line_id"] for line in removed.content["lines"]
    ]
