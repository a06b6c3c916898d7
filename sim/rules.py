"""Error rules of SGLS beyond the parameter schema, read from the tool's own text and the episode's state.

A call a documented API would refuse is refused with the status a real one gives (`sim.errors`):
- 400, invalid argument: a value outside the values the description lists, a date or time zone that is not one
  (a search answers such a filter with no results, as a real one does);
- 404, unknown id: an id argument not shaped like the description's example ids (ids the episode already stated
  are always accepted), or an object the episode deleted;
- 409, refused in this state: the tool's name requires a status of the object ('cancel_pending_order',
  'return_delivered_order_items') that a change in this episode moved it away from; or two id lists the description
  pairs position by position ('should match the item id in the same position') have different lengths; or a call
  that creates something (`book_*`, `create_*`, `place_*`...) repeating, argument for argument, one this episode
  already made, where the repeat could not pay again: a second identical booking paid with a certificate or a
  gift card the first one used (or naming no payment) is refused as a duplicate; one paid only by credit card is a
  second booking, as the real tool makes it;
- 404 or 409, spent payment (`sim.ledger`): a state-changing call paying with a single-use method (a travel
  certificate) an earlier write of this episode used is not found, as the real tool answers once it has removed it;
  one asking a stored-value method (a gift card) for more than the balance an answer stated, less what this
  episode's writes took, is refused as not enough balance.

Without a world seed, 404 too for an id outside a collection an earlier answer listed (a user's reservations, their
payment methods), once the episode's requests follow that list (`sim.enumerations`).

With a world seed (`sim.world`; none by default), what a database would say: 404 for an id of a kind the seed holds
that neither the seed nor this episode stated as an id of that kind, the seeded status in the name's precondition, and
a lookup of an id by the object's fields (`find_user_id_by_email`) answered from the seed (or 404).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sim.describe import PAIRED, date_format, description, examples, listed_values, name_words, shape_of
from sim.errors import INVALID, NOT_FOUND, RULE, STATUS_OF
from sim.ledger import payments
from sim.schemas import ToolSpec
from sim.state import CREATE_VERBS, EpisodeState, identical_calls, is_id_key, is_write, resolve, status_values, verb_of
from slca.contracts import ToolResult


def refusal(spec: ToolSpec, arguments: dict[str, Any], state: EpisodeState) -> ToolResult | None:
    """The error result a documented API would give this call, or None."""
    props = spec.parameters.get("properties", {}) if isinstance(spec.parameters, dict) else {}
    for check in (_documented_values, _formats, _id_shapes, _unknown_to_world, _outside_enumeration):
        if found := check(props, arguments, state):
            if check is _formats and _is_search(spec):
                return ToolResult(ok=True, content=[])
            return found
    if gone := state.deleted(arguments):
        return _error(NOT_FOUND, f"'{gone}' not found (it was deleted)")
    return (
        _paired_lists(props, arguments)
        or _status_precondition(spec, arguments, state)
        or _spent_payment(spec, arguments, state)
        or _duplicate_creation(spec, arguments, state)
        or _world_lookup(spec, arguments, state)
        or _world_search(spec, arguments, state)
    )


def _is_search(spec: ToolSpec) -> bool:
    """A read whose answer is a list: a filter value nothing can match finds nothing, as a real search does."""
    schema = spec.response_schema if isinstance(spec.response_schema, dict) else {}
    return not is_write(spec.name) and resolve(schema).get("type") == "array"


def _error(kind: str, message: str) -> ToolResult:
    return ToolResult(ok=False, status=STATUS_OF[kind], error=message)


def _documented_values(props, arguments, state) -> ToolResult | None:
    for key, value in arguments.items():
        allowed = listed_values(description(props.get(key)))
        if allowed and isinstance(value, str) and value not in allowed:
            return _error(INVALID, f"invalid argument '{key}': {value!r} is not one of {allowed}")
    return None


def _formats(props, arguments, state) -> ToolResult | None:
    for key, value in arguments.items():
        fmt = date_format(description(props.get(key)))
        if fmt is None or not isinstance(value, str):
            continue
        try:
            if fmt == "date":
                date.fromisoformat(value)
            elif fmt == "date-time":
                datetime.fromisoformat(value)
            else:
                ZoneInfo(value)
        except (ValueError, ZoneInfoNotFoundError):
            return _error(INVALID, f"invalid argument '{key}': {value!r} is not a valid {fmt}")
    return None


def _id_shapes(props, arguments, state) -> ToolResult | None:
    for key, value in arguments.items():
        shown = examples(description(props.get(key)))
        if not shown or not (is_id_key(key) or key.endswith("_ids")):
            continue
        for ident in value if isinstance(value, list) else [value]:
            if not isinstance(ident, str) or state.stated(ident):
                continue
            if not any(shape_of(example).fullmatch(ident) for example in shown):
                return _error(NOT_FOUND, f"{key.removesuffix('s').replace('_', ' ')} '{ident}' not found")
    return None


def _unknown_to_world(props, arguments, state: EpisodeState) -> ToolResult | None:
    """With a world seed: an id of a kind the seed holds that neither the seed nor this episode has stated as an id of
    that kind (an item id an order stated is no product id)."""
    world = state.world
    if world is None:
        return None
    for key, value in arguments.items():
        kind = world.kind_of(key)
        if kind is None:
            continue
        for ident in value if isinstance(value, list) else [value]:
            if isinstance(ident, str) and not world.exists(kind, ident) and not state.stated(ident, kind):
                return _error(NOT_FOUND, f"{kind.removesuffix('_id').replace('_', ' ')} '{ident}' not found")
    return None


def _outside_enumeration(props, arguments, state: EpisodeState) -> ToolResult | None:
    """An id outside a collection an answer of this episode listed, once the episode's requests follow that list
    (`sim.enumerations`: none of them brought an id of that kind from elsewhere)."""
    found = state.enumerations.unknown(state.named_ids(arguments), state.stated)
    if found is None:
        return None
    kind, ident = found
    return _error(NOT_FOUND, f"{kind.removesuffix('_id').replace('_', ' ')} '{ident}' not found")


def _world_lookup(spec: ToolSpec, arguments, state: EpisodeState) -> ToolResult | None:
    """With a world seed: a read answering one id (a string) of a kind its name holds (`find_user_id_by_email`),
    asked by fields of the object rather than by id, answers the first seeded object whose fields match, or 404."""
    world = state.world
    if world is None or is_write(spec.name) or resolve(spec.response_schema).get("type") != "string":
        return None
    kind = next((k for k in world.kinds if k in spec.name), None)
    if kind is None or not arguments or any(world.kind_of(key) for key in arguments):
        return None
    found = world.find(kind, arguments)
    if not found:
        return _error(NOT_FOUND, f"{kind.removesuffix('_id').replace('_', ' ')} not found")
    return ToolResult(ok=True, content=found[0], meta={"source": "world"})


def _world_search(spec: ToolSpec, arguments, state: EpisodeState) -> ToolResult | None:
    """With a world seed: a read answering a list of objects, asked by fields rather than ids (`search_direct_flight`),
    answers the seeded records that match (`WorldSeed.search`), none if none do."""
    world = state.world
    if world is None or is_write(spec.name) or not arguments or any(world.kind_of(key) for key in arguments):
        return None
    schema = resolve(spec.response_schema)
    item = resolve(schema.get("items"), spec.response_schema) if schema.get("type") == "array" else {}
    if item.get("type") != "object":
        return None
    item = {**item, "properties": {k: resolve(v, spec.response_schema) for k, v in item.get("properties", {}).items()}}
    found = world.search(arguments, item)
    return None if found is None else ToolResult(ok=True, content=found, meta={"source": "world"})


def _paired_lists(props, arguments) -> ToolResult | None:
    lists = [k for k, v in arguments.items() if isinstance(v, list) and k.endswith("_ids")]
    for key in lists:
        if not PAIRED.search(description(props.get(key))):
            continue
        for other in lists:
            if other != key and len(arguments[other]) != len(arguments[key]):
                return _error(RULE, f"'{key}' and '{other}' must pair up item by item (lengths differ)")
    return None


def _status_precondition(spec: ToolSpec, arguments, state: EpisodeState) -> ToolResult | None:
    """A status the tool's name requires ('pending' in cancel_pending_order) against the one this episode set."""
    words = name_words(spec.name)
    required = [v for v in status_values(spec.response_schema) if v in words]
    if not required:
        return None
    for key, value in arguments.items():
        if not (is_id_key(key) and isinstance(value, str)):
            continue
        current = state.established.get(value, {}).get("status") or state.seeded_status(value)
        if current is not None and current not in required:
            return _error(RULE, f"'{value}' is {current!r}; {spec.name} needs it {' or '.join(map(repr, required))}")
    return None


def _spent_payment(spec: ToolSpec, arguments, state: EpisodeState) -> ToolResult | None:
    """A state-changing call paying with a method this episode's own writes used up (`sim.ledger`): checked before a
    duplicate, since a spent certificate is what the real tool reports first (not found)."""
    if not is_write(spec.name):
        return None
    found = state.ledger.refusal(arguments, state.owner(arguments))
    return _error(*found) if found else None


def _duplicate_creation(spec: ToolSpec, arguments, state: EpisodeState) -> ToolResult | None:
    """The same creating call, with the same arguments, already answered in this episode, unless it pays only with
    methods that spend nothing the simulator can count (a credit card): τ² airline books such a repeat as a second
    reservation (fidelity replay, airline episode 35), while a repeat paying with a gift card or a certificate the
    first one used is refused (episodes 24, 25: 'not enough balance')."""
    if verb_of(spec.name) not in CREATE_VERBS:
        return None
    paid_with = payments(arguments)
    if paid_with and not any(state.ledger.limited(ident) for ident, _ in paid_with):
        return None
    if identical_calls(state.history, spec.name, arguments):
        return _error(RULE, f"duplicate: this episode already made {spec.name} with the same arguments")
    return None
