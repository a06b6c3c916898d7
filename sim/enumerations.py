"""Collections the episode's answers enumerated, and when an id outside them is not found.

Why: an answer that lists a user's reservations or orders (`reservations: ["ZFA04Y", ...]`) or payment methods (a
mapping of id → method) says which of them exist; a later call naming another well-formed id of that kind names
something the simulator itself said is not there, and a real API answers it as not found.

But a simulator that knows no world invents those lists, while the caller may hold ids from elsewhere (the user
read them off a booking the simulator never saw). Closing a collection on the simulator's word alone would refuse
those real ids. So a collection closes only once the episode follows it: a request has named an id the enumeration
listed, and no request has named an id of that kind that nothing in the episode had stated. From then on the caller
lives in the simulator's world for that kind, and an id it never heard of is one the world lacks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Stated = Callable[[str, str], bool]
"""(id, kind) → the episode stated this id as an id of that kind."""


def listed(content: Any) -> dict[str, set[str]]:
    """kind → ids of each collection an answer enumerates, at any depth: a list of id strings under a plural name
    (`orders` → `order_id`), or a mapping of id → an object carrying that id (`payment_methods` →
    `payment_method_id`). Lists of objects are parts of one object (an order's items), not a whole collection."""
    out: dict[str, set[str]] = {}
    stack = [content]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            stack.append(value)
            if not (isinstance(key, str) and key.endswith("s") and not key.endswith("_ids")) or not value:
                continue
            kind = f"{key[:-1]}_id"
            if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
                out.setdefault(kind, set()).update(value)
            elif isinstance(value, dict) and all(_carries(obj, ident) for ident, obj in value.items()):
                out.setdefault(kind, set()).update(value)
    return out


def _carries(obj: Any, ident: str) -> bool:
    return isinstance(obj, dict) and ident in obj.values()


@dataclass
class Enumerations:
    listed: dict[str, set[str]] = field(default_factory=dict)
    """kind → every id an answer of the episode enumerated as a collection of that kind."""
    followed: set[str] = field(default_factory=set)
    """Kinds of which a request named a listed id."""
    outside: set[str] = field(default_factory=set)
    """Kinds of which a request named an id nothing in the episode had stated: the caller knows ids from elsewhere."""

    def note_answer(self, content: Any) -> dict[str, set[str]]:
        found = listed(content)
        for kind, ids in found.items():
            self.listed.setdefault(kind, set()).update(ids)
        return found

    def note_request(self, named: list[tuple[str, str]], stated: Stated) -> None:
        """What a call the simulator answered named (before its own answer is noted)."""
        for kind, ident in named:
            if kind not in self.listed:
                continue
            if ident in self.listed[kind]:
                self.followed.add(kind)
            elif not stated(ident, kind):
                self.outside.add(kind)

    def unknown(self, named: list[tuple[str, str]], stated: Stated) -> tuple[str, str] | None:
        """(kind, id) of the first id a call names outside a collection the episode follows, else None."""
        for kind, ident in named:
            closed = kind in self.followed and kind not in self.outside
            if closed and ident not in self.listed[kind] and not stated(ident, kind):
                return kind, ident
        return None
