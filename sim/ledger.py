"""What an episode's own writes spent from stored-value payment methods, and the refusals that follow.

Why: a simulator that forgets what it already charged lets a second booking pay with the certificate the first one
used up, or with a gift card the first one emptied; the real tools refuse both. What the ledger knows comes only from
the episode: the answers it gave (a payment method stated with its `source` and its balance, `amount`) and the
state-changing calls it answered successfully (what they paid with, and how much where the request says). A method
is its owner's (`EpisodeState.owner`: the user a call is for): a booking the simulator accepted for another user
spends that user's method, not this one's.

- a single-use method (a travel certificate: τ² airline's policy says its remaining amount is not refundable, and the
  real tool takes it off the profile) is consumed by the first write that pays with it; a later call naming it is
  answered as the real one answers: the payment method is not found (404);
- a method with a balance the episode stated (a gift card's `amount`) is refused (409, as 'not enough balance')
  once a call asks more than what the episode's own writes left of it.

A method's source is the one an answer stated for it, else the one its id names ('certificate_7815826', the shape the
tools' own descriptions give: 'credit_card_…', 'gift_card_…', 'certificate_…').
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sim.errors import NOT_FOUND, RULE

SINGLE_USE = "single_use"
BALANCE = "balance"
SPENDING: dict[str, str] = {"certificate": SINGLE_USE, "gift_card": BALANCE}
"""Source of a payment method → how paying with it spends it (sources not listed, a credit card, spend nothing the
simulator can count)."""
NAMED_SOURCE = re.compile(r"([a-z]+(?:_[a-z]+)*)_\d+")
BALANCE_KEYS = ("amount", "balance")
Held = tuple[str | None, str]
"""(owner, payment method id): the user a method belongs to (None where the episode does not say) and its id."""


def is_payment_key(key: str) -> bool:
    """`payment_id`, `payment_method_id`: an argument naming the method a call pays with."""
    low = key.lower()
    return "payment" in low and (low.endswith("_id") or low.endswith("id"))


def payments(arguments: dict[str, Any]) -> list[tuple[str, float | None]]:
    """(method id, amount or None) of each payment a request names: a scalar `payment_id`, or the rows of a list of
    {payment_id, amount} objects (a booking paid with several methods)."""
    out: list[tuple[str, float | None]] = []
    for key, value in arguments.items():
        if is_payment_key(key) and isinstance(value, str) and value:
            out.append((value, None))
        elif isinstance(value, list):
            for row in value:
                if not isinstance(row, dict):
                    continue
                ident = next((v for k, v in row.items() if is_payment_key(k) and isinstance(v, str) and v), None)
                amount = row.get("amount")
                if ident is not None:
                    out.append((ident, amount if _is_number(amount) else None))
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class Ledger:
    sources: dict[str, str] = field(default_factory=dict)
    """method id → the source an answer stated for it."""
    balances: dict[Held, float] = field(default_factory=dict)
    """(owner, method id) → the balance an answer stated for it (before the episode's own spending)."""
    spent: dict[Held, float] = field(default_factory=dict)
    """(owner, method id) → what the episode's successful writes paid with it."""
    consumed: set[Held] = field(default_factory=set)
    """(owner, method id) of single-use methods a successful write paid with."""

    def source_of(self, ident: str) -> str | None:
        if ident in self.sources:
            return self.sources[ident]
        named = NAMED_SOURCE.fullmatch(ident)
        return named.group(1) if named else None

    def limited(self, ident: str) -> bool:
        """A method a payment can use up (single-use or with a balance), as opposed to a credit card."""
        return (self.source_of(ident) or "") in SPENDING

    def note_answer(self, content: Any, owner: str | None) -> None:
        """Each payment method an answer states (an object with an id and a `source`), with its balance if given. A
        balance the episode already knows is kept: a later restatement may be an invented one, not a new fact."""
        for obj in _objects(content):
            ident = obj.get("id") if isinstance(obj.get("id"), str) else None
            if ident is None or not isinstance(obj.get("source"), str):
                continue
            self.sources.setdefault(ident, obj["source"])
            amount = next((obj[k] for k in BALANCE_KEYS if _is_number(obj.get(k))), None)
            if amount is not None:
                self.balances.setdefault((owner, ident), float(amount))

    def note_write(self, arguments: dict[str, Any], owner: str | None) -> None:
        """What a successful state-changing call paid with is spent."""
        for ident, amount in payments(arguments):
            if SPENDING.get(self.source_of(ident) or "") == SINGLE_USE:
                self.consumed.add((owner, ident))
            if amount is not None:
                self.spent[owner, ident] = self.spent.get((owner, ident), 0.0) + float(amount)

    def refusal(self, arguments: dict[str, Any], owner: str | None) -> tuple[str, str] | None:
        """(error kind, message) for a call paying with a method this episode already used up, else None."""
        for ident, amount in payments(arguments):
            held = (owner, ident)
            if held in self.consumed:
                return NOT_FOUND, f"payment method '{ident}' not found (a single-use method this episode spent)"
            if SPENDING.get(self.source_of(ident) or "") != BALANCE or held not in self.balances:
                continue
            left = self.balances[held] - self.spent.get(held, 0.0)
            if (amount is not None and amount > left) or (amount is None and left <= 0):
                return RULE, f"not enough balance in payment method '{ident}' ({left:g} left in this episode)"
        return None


def _objects(value: Any) -> list[dict[str, Any]]:
    """Every object inside an answer, at any depth."""
    out: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out
