"""What SGLS knows from its own episode, without a world (`sim.ledger`, `sim.enumerations`): a certificate a
booking used is consumed, a stated gift-card balance is spent by the episode's writes, and once the episode's calls
follow a collection an answer listed, a well-formed id outside it is not found."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from sim import make_provider
from sim.enumerations import Enumerations, listed
from sim.errors import NOT_FOUND, RULE
from sim.fidelity.replay import simulated
from sim.ledger import Ledger
from sim.real.tau2 import tau2_pack
from sim.settings import SimSettings

BOOKING = {
    "user_id": "sara_doe_496",
    "origin": "JFK",
    "destination": "SFO",
    "flight_type": "one_way",
    "cabin": "economy",
    "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}],
    "passengers": [{"first_name": "Sara", "last_name": "Doe", "dob": "1990-01-01"}],
    "total_baggages": 0,
    "nonfree_baggages": 0,
    "insurance": "no",
}


def _airline(calls) -> list:
    """Run `calls` (name, arguments, or a function of the results so far giving them) on simulated airline tools."""

    async def run():
        definitions = [simulated(t.definition("real")) for t in tau2_pack("airline").tools.values()]
        provider = make_provider(SimSettings(cache=False, real_packs=[]), None, CollectorRegistry())
        episode = await provider.new_episode(definitions, "knowledge")
        results = []
        try:
            for call in calls:
                name, args = call(results) if callable(call) else call
                results.append(await episode.call(name, args))
            return results
        finally:
            await provider.close()

    return asyncio.run(run())


def _booking(*payments: tuple[str, int], **changes) -> dict:
    return {**BOOKING, **changes, "payment_methods": [{"payment_id": p, "amount": a} for p, a in payments]}


def test_a_certificate_a_booking_used_is_not_found_for_the_next_one():
    first, second, other = _airline(
        [
            ("book_reservation", _booking(("certificate_1234567", 100), ("credit_card_7654321", 74))),
            ("book_reservation", _booking(("certificate_1234567", 100), ("credit_card_7654321", 74), cabin="business")),
            ("book_reservation", _booking(("certificate_7777777", 100), ("credit_card_7654321", 74), cabin="business")),
        ]
    )
    assert first.ok
    assert not second.ok and second.status == 404 and "certificate_1234567" in second.error
    assert other.ok  # an unused certificate pays


def test_a_certificate_is_its_users_a_booking_for_another_user_spends_none_of_it():
    other_user, first, second = _airline(
        [
            ("book_reservation", _booking(("certificate_1234567", 174), user_id="omar_ali_123")),
            ("book_reservation", _booking(("certificate_1234567", 174))),
            ("book_reservation", _booking(("certificate_1234567", 174), cabin="business")),
        ]
    )
    assert other_user.ok and first.ok
    assert not second.ok and second.status == 404


def test_a_repeated_booking_paid_by_card_is_a_second_booking_as_the_real_tool_makes_it():
    first, again = _airline([("book_reservation", _booking(("credit_card_7654321", 174)))] * 2)
    assert first.ok and again.ok
    assert again.content["reservation_id"] != first.content["reservation_id"]


def test_a_repeated_booking_paid_partly_by_gift_card_is_a_duplicate():
    paid = _booking(("gift_card_7654321", 74), ("credit_card_7654321", 100))
    first, again = _airline([("book_reservation", paid)] * 2)
    assert first.ok and not again.ok and again.status == 409 and "duplicate" in again.error


def test_a_stated_gift_card_balance_is_spent_by_the_episodes_writes():
    ledger = Ledger()
    card = {"source": "gift_card", "id": "gift_card_1", "amount": 100}
    ledger.note_answer({"user_id": "u", "payment_methods": {"gift_card_1": card}}, "u")
    assert ledger.refusal({"payment_methods": [{"payment_id": "gift_card_1", "amount": 60}]}, "u") is None  # first use
    ledger.note_write({"payment_methods": [{"payment_id": "gift_card_1", "amount": 60}]}, "u")
    assert ledger.refusal({"payment_methods": [{"payment_id": "gift_card_1", "amount": 40}]}, "u") is None
    kind, message = ledger.refusal({"payment_methods": [{"payment_id": "gift_card_1", "amount": 41}]}, "u")
    assert kind == RULE and "not enough balance" in message
    ledger.note_write({"payment_id": "credit_card_2"}, "u")  # a card spends nothing the simulator can count
    assert ledger.refusal({"payment_id": "credit_card_2"}, "u") is None


def test_a_stated_source_wins_over_the_one_the_id_names():
    ledger = Ledger()
    ledger.note_answer([{"id": "pm_1", "source": "certificate", "amount": 50}], "u")
    ledger.note_write({"payment_id": "pm_1"}, "u")
    kind, message = ledger.refusal({"payment_id": "pm_1"}, "u")
    assert kind == NOT_FOUND and "pm_1" in message


def test_listed_reads_lists_of_ids_and_mappings_by_id_not_parts():
    answer = {
        "user_id": "u_1",
        "reservations": ["ABC123", "DEF456"],
        "payment_methods": {"gift_card_1": {"id": "gift_card_1", "source": "gift_card"}},
        "items": [{"item_id": "1"}],
        "address": {"city": "Paris"},
    }
    assert listed(answer) == {"reservation_id": {"ABC123", "DEF456"}, "payment_method_id": {"gift_card_1"}}


def test_a_collection_closes_only_once_the_requests_follow_it():
    stated = {("ABC123", "reservation_id")}
    enum = Enumerations()
    enum.note_answer({"reservations": ["ABC123"]})
    named = [("reservation_id", "ZZZ999")]
    assert enum.unknown(named, lambda i, k: (i, k) in stated) is None  # open: nothing followed the list yet
    enum.note_request([("reservation_id", "ABC123")], lambda i, k: (i, k) in stated)
    assert enum.unknown(named, lambda i, k: (i, k) in stated) == ("reservation_id", "ZZZ999")
    enum.note_request([("reservation_id", "QQQ111")], lambda i, k: False)  # an id from elsewhere: it opens again
    assert enum.unknown(named, lambda i, k: (i, k) in stated) is None


def _listed_reservations(results) -> list[str]:
    return results[0].content["reservations"]


def test_after_following_a_listed_reservation_an_unknown_well_formed_one_is_not_found():
    results = _airline(
        [
            ("get_user_details", {"user_id": "sara_doe_496"}),
            lambda r: ("get_reservation_details", {"reservation_id": _listed_reservations(r)[0]}),
            ("get_reservation_details", {"reservation_id": "ZZZ999"}),
            ("cancel_reservation", {"reservation_id": "ZZZ999"}),
            lambda r: ("cancel_reservation", {"reservation_id": _listed_reservations(r)[-1]}),
        ]
    )
    user, listed_one, unknown_read, unknown_write, stated_write = results
    assert user.ok and listed_one.ok and stated_write.ok
    for refused in (unknown_read, unknown_write):
        assert not refused.ok and refused.status == 404 and "ZZZ999" in refused.error


def test_an_id_from_elsewhere_keeps_the_collection_open():
    results = _airline(
        [
            ("get_user_details", {"user_id": "sara_doe_496"}),
            ("get_reservation_details", {"reservation_id": "WUNA5K"}),  # the user's own, never listed: from elsewhere
            lambda r: ("get_reservation_details", {"reservation_id": _listed_reservations(r)[0]}),
            ("get_reservation_details", {"reservation_id": "ZZZ999"}),
        ]
    )
    assert all(result.ok for result in results)
