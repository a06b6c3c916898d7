"""Episode state of SGLS: what earlier calls of one episode stated, changed and asked for.

Why: a simulated API must agree with itself within an episode. An id created by `book_*` must be found by
`get_*`; an `update_*` must be visible to the next read; a deleted object is gone (404); an order this episode
cancelled is no longer pending. The state holds, per id, the object as last stated (`records`), the fields this
episode's own changes set (`established`, which the rules of `sim.rules` read), every id mentioned, and the values
the requests carried (`context`: a field the episode holds one value for, such as the user's id, is answered
with it). `sim.answer` shapes each answer with it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from sim.enumerations import Enumerations
from sim.jsonpath import leaves
from sim.ledger import Ledger
from sim.schemas import canonical_json, digest
from sim.world import WorldSeed

WRITE_VERBS = (
    "create",
    "add",
    "book",
    "update",
    "modify",
    "set",
    "cancel",
    "send",
    "post",
    "put",
    "register",
    "change",
    "exchange",
    "return",
    "schedule",
    "delete",
    "remove",
    "place",
    "submit",
    "edit",
)
DELETE_VERBS = ("delete", "remove")
CREATE_VERBS = ("book", "create", "place", "register", "submit", "schedule")
"""Verbs of calls that make a new object (not `add`: adding an item twice to a cart is two items)."""
DELETED = "__deleted__"
USER_KEY = "user_id"
"""The field naming the user an object or a call belongs to (whose payment methods it spends, `sim.ledger`)."""
ANY_KIND = "*"
"""The kind of an id carried under a bare `id` key (`EpisodeState.id_kind`)."""


def is_id_key(key: str) -> bool:
    """`id`, `user_id`, `userId` — not `paid` or `valid`."""
    return key.lower() == "id" or key.lower().endswith("_id") or (len(key) > 2 and key.endswith("Id"))


def verb_of(tool: str) -> str:
    return tool.lower().split("_", 1)[0]


def is_write(tool: str) -> bool:
    return verb_of(tool) in WRITE_VERBS


def own_id(obj: Any) -> tuple[str, str] | None:
    """(key, id) of the object itself: its first id-named field holding a string."""
    if not isinstance(obj, dict):
        return None
    return next(((k, v) for k, v in obj.items() if is_id_key(k) and isinstance(v, str) and v), None)


def entities(content: Any) -> list[dict[str, Any]]:
    """The objects an answer is about: the answer itself, or the items of a list answer, that have an id."""
    items = content if isinstance(content, list) else [content]
    return [item for item in items if own_id(item) is not None]


def resolve(schema: Any, root: Any = None) -> dict[str, Any]:
    """`schema` with a local `$ref` followed (a few levels), {} for anything else."""
    root = schema if root is None else root
    for _ in range(8):
        if not isinstance(schema, dict) or "$ref" not in schema:
            break
        node: Any = root
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema = {**node, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema if isinstance(schema, dict) else {}


def root_properties(schema: Any) -> dict[str, Any]:
    """The properties of an object response (its `$ref` followed), each resolved."""
    top = resolve(schema)
    return {k: resolve(v, schema) for k, v in (top.get("properties") or {}).items()}


def status_values(schema: Any) -> list[str]:
    """The values the response's `status` field may take (its enum or const, inside anyOf too)."""
    prop = root_properties(schema).get("status", {})
    options = [prop, *[resolve(o, schema) for o in prop.get("anyOf", []) + prop.get("oneOf", [])]]
    values = [v for o in options for v in [*o.get("enum", []), *([o["const"]] if "const" in o else [])]]
    return [v for v in values if isinstance(v, str)]


@dataclass
class EpisodeState:
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    """id → the object's fields as last stated."""
    established: dict[str, dict[str, Any]] = field(default_factory=dict)
    """id → the fields this episode's own state changes set (a cancellation's status...)."""
    mentioned: set[str] = field(default_factory=set)
    """Every id a request or an answer of this episode carried."""
    stated_as: dict[str, set[str]] = field(default_factory=dict)
    """id → the kinds it was carried as (`id_kind`: `item_id` for an order's item, `product_id`...): an id an order
    stated as an item is no product id (`stated`)."""
    requested: dict[str, str] = field(default_factory=dict)
    """field name → the latest value (canonical JSON) a request carried under it."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """Earlier calls `{name, arguments, content}` (shown to the llm and local backends)."""
    world: WorldSeed | None = None
    """The objects that exist (`sim.world`), shared and never written; None: the simulator knows no world."""
    ledger: Ledger = field(default_factory=Ledger)
    enumerations: Enumerations = field(default_factory=Enumerations)
    """The collections the episode's answers listed, and whether its requests follow them (`sim.enumerations`)."""
    """What the episode's own writes spent from the payment methods its answers stated (`sim.ledger`)."""

    def fingerprint(self) -> str:
        seeded = [self.world.digest] if self.world is not None else []
        return digest(canonical_json([self.records, self.established, *seeded]))

    def adopt(self, arguments: Any) -> None:
        """With a world seed: a copy of each seeded object the call names (`order_id`), as if the episode had stated
        it, unless the episode already holds what it states of that object (its own changes included)."""
        if self.world is None or not isinstance(arguments, dict):
            return
        for key, value in arguments.items():
            kind = self.world.kind_of(key)
            if kind is None or not isinstance(value, str) or self.holds(value):
                continue
            if (seeded := self.world.record(value, kind)) is not None:  # an item id named as a product id is none
                self.records.setdefault(value, {}).update(copy.deepcopy(seeded))
                self._mention(value, kind)

    def holds(self, ident: str) -> bool:
        """The episode holds a statement of this object (a field other than its markers)."""
        return any(not k.startswith("__") for k in self.records.get(ident, {}))

    def seeded_status(self, ident: str) -> Any:
        """The status the world seed gives this object (None without a seed, or without a status)."""
        record = self.world.record(ident) if self.world is not None else None
        return record.get("status") if isinstance(record, dict) else None

    def stated(self, ident: str, kind: str | None = None) -> bool:
        """The episode carried this id; as an id of `kind` (`id_kind`) when one is given, or under a bare `id` key,
        whose kind no key says."""
        if kind is None:
            return ident in self.mentioned
        return bool(self.stated_as.get(ident, set()) & {kind, ANY_KIND})

    def id_kind(self, key: str) -> str:
        """The kind of id a key carries: the world seed's kind (`new_item_ids` → `item_id`), else the key itself
        with a list's plural made singular; a bare `id` (a payment method inside a user) is of any kind."""
        if key.lower() == "id":
            return ANY_KIND
        kind = self.world.kind_of(key) if self.world is not None else None
        return kind or (key[:-1] if key.endswith("_ids") else key)

    def owner(self, arguments: Any) -> str | None:
        """The user a call is for: its `user_id`, else the `user_id` the episode stated for an object it names (a
        reservation's owner); None where neither says."""
        if not isinstance(arguments, dict):
            return None
        if isinstance(arguments.get(USER_KEY), str):
            return arguments[USER_KEY]
        for ident in self.referenced_ids(arguments):
            if isinstance(owner := self.records[ident].get(USER_KEY), str):
                return owner
        return None

    def named_ids(self, arguments: Any) -> list[tuple[str, str]]:
        """(kind, id) of each id a call's top-level arguments name, lists of ids (`item_ids`) included."""
        out: list[tuple[str, str]] = []
        for key, value in arguments.items() if isinstance(arguments, dict) else ():
            if is_id_key(key) and isinstance(value, str) and value:
                out.append((self.id_kind(key), value))
            elif key.endswith("_ids") and isinstance(value, list):
                out += [(self.id_kind(key), v) for v in value if isinstance(v, str) and v]
        return out

    def _mention(self, ident: str, kind: str) -> None:
        self.mentioned.add(ident)
        self.stated_as.setdefault(ident, set()).add(kind)

    def referenced_ids(self, arguments: Any) -> list[str]:
        if not isinstance(arguments, dict):
            return []
        return [v for k, v in arguments.items() if is_id_key(k) and isinstance(v, str) and v in self.records]

    def deleted(self, arguments: Any) -> str | None:
        """The id of a deleted object the call refers to, if any (reads of it answer 404)."""
        return next((i for i in self.referenced_ids(arguments) if self.records[i].get(DELETED)), None)

    def context(self) -> dict[str, Any]:
        """Each field the episode's requests carried, with the latest value (the user's id, their zip code...)."""
        return {key: _decode(value) for key, value in self.requested.items()}

    def record(self, tool: str, arguments: Any, content: Any, changed: dict[str, Any] | None = None) -> None:
        """Remember what this call stated, changed and asked for."""
        args = arguments if isinstance(arguments, dict) else {}
        self.enumerations.note_request(self.named_ids(args), self.stated)  # before this call's ids count as stated
        for kind, ids in self.enumerations.note_answer(content).items():
            for ident in ids:
                self._mention(ident, kind)
        for obj in entities(content):
            _, ident = own_id(obj)
            entry = self.records.setdefault(ident, {})
            entry.update({k: copy.deepcopy(v) for k, v in obj.items()})
        if changed:
            target = own_id(content) or next(
                ((k, v) for k, v in args.items() if is_id_key(k) and isinstance(v, str)), None
            )
            if target is not None:
                self.established.setdefault(target[1], {}).update(copy.deepcopy(changed))
                self.records.setdefault(target[1], {}).update(copy.deepcopy(changed))
        names_parts = any(k.endswith("_ids") and isinstance(v, list) and v for k, v in args.items())
        if verb_of(tool) in DELETE_VERBS and not names_parts:  # `remove_order_items` removes items, not the order
            for key, value in args.items():
                if is_id_key(key) and isinstance(value, str):
                    self.records.setdefault(value, {})[DELETED] = True
        for source in (args, content):
            for path, leaf in leaves(source).items():
                key = next((p for p in reversed(path) if isinstance(p, str)), "")
                if isinstance(leaf, str) and leaf and (is_id_key(key) or key.endswith("_ids")):
                    self._mention(leaf, self.id_kind(key))
        for path, leaf in leaves(args).items():
            key = next((p for p in reversed(path) if isinstance(p, str)), "")
            if key and not isinstance(leaf, (dict, list)) and leaf is not None:
                self.requested[key] = canonical_json(leaf)
        self.ledger.note_answer(content, self.owner(args) or _user_of(content))
        if is_write(tool):
            self.ledger.note_write(args, self.owner(args))
        self.history.append({"name": tool, "arguments": args, "content": content})


def _user_of(content: Any) -> str | None:
    """The user an answer is about (its own `user_id`), if it says."""
    user = content.get(USER_KEY) if isinstance(content, dict) else None
    return user if isinstance(user, str) else None


def _decode(text: str) -> Any:
    import json

    return json.loads(text)


def identical_calls(history: list[dict[str, Any]], name: str, arguments: Any) -> int:
    """How many calls of `history` were `name` with these very arguments (a repeated creation's count)."""
    key = canonical_json(arguments)
    return sum(1 for past in history if past.get("name") == name and canonical_json(past.get("arguments")) == key)
