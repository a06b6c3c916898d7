"""What a state-changing call does inside the object it names, beyond its top-level fields (`sim.answer.effect`).

Each rule reads the response schema, the call's arguments and the tool's text, never a tool's name as such, and
returns changes to the answer object (`EFFECTS`, applied in order by `sim.answer.consistent`; a change that would
make the answer invalid is dropped there):

- defaults (`created_defaults`, a layer of `sim.answer` under the documented effect): an object a call creates
  (`book_*`, `create_*`...) starts with the defaults its schema declares for the fields the request does not set (a
  new reservation's `status` is its default, null, not a synthesised 'cancelled');
- stored lists: a list of objects the request carries under a name the answer lacks is stored in the one list of the
  answer whose items have the same fields (`payment_methods` [{payment_id, amount}] → `payment_history`): the whole
  list for an object the episode never stated (it is being created), appended rows for one it did;
- named parts: the ids a request names as parts of the object (`item_ids`) are in its list of parts (`items`, whose
  objects carry `item_id`): a part the answer lacks takes the place of one the request did not name; a removal
  (`remove_*`, `delete_*`) takes them out instead;
- replaced parts: two id lists the call pairs position by position (`item_ids` ↔ `new_item_ids`: 'new_' or a
  description saying 'same position') that the object stores nowhere (no `<verb>_items` field) replace each named
  part's id by its partner (a pending order's items modified; an exchange that only records its request is stored);
- no charges: a change paid with a method the request names (a modification's price difference) would add a ledger
  row whose amount a simulator without prices must invent, at a place it only knows when it knows the ledger; a
  measured try (issue 38) placed nearly every such row wrong, so only effects the request and the object's stated
  state determine are applied;
- seeded parts (`seeded_parts`, after the rules, with a world seed only): a part the call put in takes its seeded
  record's fields (a modified order's new item: the new variant's price and options);
- refunds: a cancellation (the verb, or a description saying the payment is refunded, not 'non-refundable') reverses
  every row of the object's payment ledger (a list of rows with an amount and a payment id): a row of type 'refund'
  where the row's type enum has one (amount kept), else the amount negated.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from sim.describe import PAIRED
from sim.jsonpath import Path
from sim.schemas import ToolSpec
from sim.state import CREATE_VERBS, DELETE_VERBS, is_id_key, resolve, root_properties, verb_of

Change = tuple[Path, Any]
REFUNDED = re.compile(r"\b(?:will be|is|are|gets?) refunded\b", re.IGNORECASE)
NOT_REFUNDED = re.compile(r"non-refundable|not (?:be )?refunded|no refund", re.IGNORECASE)
AMOUNT_WORDS = ("amount", "price", "total", "sum", "value")


def _item_properties(spec: ToolSpec, prop: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The properties of a list property's items (their `$ref` followed), {} when its items are not objects."""
    root = spec.response_schema
    items = resolve(prop.get("items"), root)
    return {k: resolve(v, root) for k, v in (items.get("properties") or {}).items()}


def _object_lists(spec: ToolSpec) -> dict[str, dict[str, dict[str, Any]]]:
    """Each list property of the answer whose items are objects → the items' properties."""
    out = {}
    for name, prop in root_properties(spec.response_schema).items():
        if prop.get("type") == "array":
            fields = _item_properties(spec, prop)
            if fields:
                out[name] = fields
    return out


def created_defaults(spec: ToolSpec, arguments: dict[str, Any]) -> list[Change]:
    """The defaults of a created object (`sim.answer` applies them before the documented effect, so that a status the
    description names wins over the schema's default)."""
    if verb_of(spec.name) not in CREATE_VERBS:
        return []
    props = root_properties(spec.response_schema)
    return [((k,), copy.deepcopy(p["default"])) for k, p in props.items() if "default" in p and k not in arguments]


def stored_lists(spec: ToolSpec, arguments: dict[str, Any], obj: dict[str, Any], known: bool) -> list[Change]:
    lists = _object_lists(spec)
    changes: list[Change] = []
    for key, value in arguments.items():
        if key in lists or not (isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
            continue
        fields = set().union(*(v.keys() for v in value))
        homes = [name for name, props in lists.items() if fields <= props.keys()]
        if len(homes) != 1:
            continue  # none, or ambiguous: storing it in a guessed place would be an invention
        home = homes[0]
        old = obj.get(home) if isinstance(obj.get(home), list) else []
        template = old[0] if old and isinstance(old[0], dict) else {}
        rows = [{**copy.deepcopy(template), **copy.deepcopy(v)} for v in value]
        changes.append(((home,), [*old, *rows] if known else rows))
    return changes


def _part_lists(spec: ToolSpec, obj: dict[str, Any], id_key: str) -> list[str]:
    """The answer's lists of parts whose objects carry `id_key` (`items` for `item_id`)."""
    return [name for name, props in _object_lists(spec).items() if id_key in props and isinstance(obj.get(name), list)]


def _named_lists(arguments: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(`item_id`, the ids) of each id list of the request (`item_ids`)."""
    out = []
    for key, value in arguments.items():
        if key.endswith("_ids") and not key.startswith("new_") and isinstance(value, list):
            if all(isinstance(v, str) for v in value):
                out.append((key[:-1], value))
    return out


def named_parts(spec: ToolSpec, arguments: dict[str, Any], obj: dict[str, Any], known: bool) -> list[Change]:
    changes: list[Change] = []
    for id_key, ids in _named_lists(arguments):
        for home in _part_lists(spec, obj, id_key):
            if verb_of(spec.name) in DELETE_VERBS:  # the parts a removal names are gone from the object
                kept = [p for p in obj[home] if not (isinstance(p, dict) and p.get(id_key) in ids)]
                changes += [((home,), kept)] if len(kept) != len(obj[home]) else []
                continue
            parts = copy.deepcopy(obj[home])
            present = [p.get(id_key) if isinstance(p, dict) else None for p in parts]
            free = [i for i, v in enumerate(present) if v not in ids]
            for ident in dict.fromkeys(ids):
                if ident not in present and free:
                    i = free.pop(0)
                    parts[i] = {**parts[i], id_key: ident}
                    present[i] = ident
            if parts != obj[home]:
                changes.append(((home,), parts))
    return changes


def _partner(spec: ToolSpec, arguments: dict[str, Any], key: str) -> str | None:
    """The list the request pairs with `key` position by position (`new_item_ids` for `item_ids`)."""
    props = spec.parameters.get("properties", {}) if isinstance(spec.parameters, dict) else {}
    for other, value in arguments.items():
        if other == key or not isinstance(value, list) or not other.endswith("_ids"):
            continue
        described = PAIRED.search(str((props.get(other) or {}).get("description", "")))
        if other == f"new_{key}" or described:
            return other
    return None


def replaced_parts(spec: ToolSpec, arguments: dict[str, Any], obj: dict[str, Any], known: bool) -> list[Change]:
    props = root_properties(spec.response_schema)
    verb = verb_of(spec.name)
    changes: list[Change] = []
    for id_key, ids in _named_lists(arguments):
        partner = _partner(spec, arguments, f"{id_key}s")
        stem = id_key.removesuffix("_id")
        if partner is None or any(name.startswith(f"{verb}_") and stem in name for name in props):
            continue  # not paired, or the object records the request instead of applying it
        pairs = list(zip(ids, arguments[partner]))
        for home in _part_lists(spec, obj, id_key):
            parts = copy.deepcopy(obj[home])
            done: set[int] = set()
            for old, new in pairs:
                i = next((i for i, p in enumerate(parts) if i not in done and p.get(id_key) == old), None)
                if i is not None:
                    parts[i] = {**parts[i], id_key: new}
                    done.add(i)
            if parts != obj[home]:
                changes.append(((home,), parts))
    return changes


def _ledger(spec: ToolSpec, obj: dict[str, Any]) -> tuple[str, str, str | None] | None:
    """(list name, amount field, type field with a 'refund' value or None) of the object's payment ledger."""
    for name, fields in _object_lists(spec).items():
        if not isinstance(obj.get(name), list):
            continue
        amount = next(
            (
                k
                for k, v in fields.items()
                if v.get("type") in ("number", "integer") and any(w in k for w in AMOUNT_WORDS)
            ),
            None,
        )
        pays = any(is_id_key(k) and "payment" in k for k in fields)
        if amount and pays:
            kind = next((k for k, v in fields.items() if "refund" in (v.get("enum") or [])), None)
            return name, amount, kind
    return None


def refunds(spec: ToolSpec, arguments: dict[str, Any], obj: dict[str, Any], known: bool) -> list[Change]:
    text = spec.description
    if NOT_REFUNDED.search(text) or not (verb_of(spec.name) == "cancel" or REFUNDED.search(text)):
        return []
    found = _ledger(spec, obj)
    if found is None:
        return []
    name, amount, kind = found
    rows = [copy.deepcopy(r) for r in obj[name] if isinstance(r, dict)]
    reversed_rows = []
    for row in rows:
        if kind is not None:
            row[kind] = "refund"
        elif isinstance(row.get(amount), (int, float)) and not isinstance(row.get(amount), bool):
            row[amount] = -row[amount]
        reversed_rows.append(row)
    return [((name,), [*obj[name], *reversed_rows])] if reversed_rows else []


def seeded_parts(spec: ToolSpec, before: dict[str, Any], after: dict[str, Any], world: Any) -> list[Change]:
    """With a world seed (`sim.world`): each part the effects put in the object (`after`'s parts whose id `before`'s
    list lacked: a modification's new item) takes the fields of its seeded record that the part's schema has (the new
    variant's price and options: what the real database copies in). Parts already there keep theirs (an order's
    item keeps the price it was bought at)."""
    if world is None:
        return []
    changes: list[Change] = []
    for home, fields in _object_lists(spec).items():
        old, new = before.get(home), after.get(home)
        if not (isinstance(old, list) and isinstance(new, list)):
            continue
        parts = copy.deepcopy(new)
        for part in parts:
            found = _seeded_part(part, old, fields, world)
            if found is not None:
                part.update(found)
        if parts != new:
            changes.append(((home,), parts))
    return changes


def _seeded_part(part: Any, old: list[Any], fields: dict[str, Any], world: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    for key, ident in part.items():
        kind = world.kind_of(key) if is_id_key(key) and isinstance(ident, str) else None
        if kind is None or any(isinstance(p, dict) and p.get(key) == ident for p in old):
            continue
        record = world.record(ident, kind)
        if record is not None:
            return {k: copy.deepcopy(v) for k, v in record.items() if k in fields and k != key}
    return None


Effect = Callable[[ToolSpec, dict[str, Any], dict[str, Any], bool], list[Change]]
EFFECTS: list[Effect] = [stored_lists, named_parts, replaced_parts, refunds]
"""Applied in this order: the parts a request names are placed before they are replaced, and a ledger is complete
(rows the request stored) before a cancellation reverses it."""
