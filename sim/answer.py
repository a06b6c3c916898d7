"""A backend's answer shaped to agree with the request, the episode and the tool's documented effect.

Layers, later ones winning: the episode's context (a field the requests carried, its latest value: the user's id),
the request's own values (echoed fields, search filters in each result, lists of objects merged item by item, a
conversion's target: `time_zone` ← `to_tz`),
the object as the episode last stated it (restated whole: the same fields, the same values), the request again,
and, for a state-changing call, its effect: arguments stored under the verb's name (`reason` → `cancel_reason`,
`item_ids` → `return_items`) and the new status the description or the status enum names; then what the call does
inside the object (`sim.effects`: rows it stores, parts it replaces, refunds). Every layer keeps the answer valid
against the response schema: all at once when that holds, else change by change.
"""

from __future__ import annotations

import copy
from typing import Any

from sim.describe import name_words, new_status
from sim.effects import EFFECTS, created_defaults, seeded_parts
from sim.jsonpath import MISSING, Path, put
from sim.schemas import ToolSpec, is_valid
from sim.state import EpisodeState, is_id_key, is_write, own_id, root_properties, status_values, verb_of
from sim.world import WorldSeed

Change = tuple[Path, Any]
FILLERS = {"requested"}
"""Words a status may add to the verb and the tool's name ('exchange requested')."""


def effect(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """The top-level fields a state-changing call sets on its object, read from its name, arguments and text."""
    if not is_write(spec.name):
        return {}
    props = root_properties(spec.response_schema)
    verb = verb_of(spec.name)
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        names = [f"{verb}_{key}"]
        if key.endswith("_ids"):
            names.append(f"{verb}_{key[:-4]}s")
        for name in names:
            if name in props:
                out[name] = copy.deepcopy(value)
    status = _new_status(spec, verb, props)
    if status is not None:
        out["status"] = status
    return out


def _new_status(spec: ToolSpec, verb: str, props: dict[str, Any]) -> str | None:
    if "status" not in props:
        return None
    values = status_values(spec.response_schema)
    said = new_status(spec.description)
    if said is not None and (not values or said in values):
        return said
    stem = verb[: min(5, len(verb))]
    words = name_words(spec.name)
    fits = [
        v
        for v in values
        if any(w.startswith(stem) for w in _words(v))
        and {w for w in _words(v) if not w.startswith(stem)} <= words | FILLERS
    ]
    if len(fits) == 1:
        return fits[0]
    if not values and verb == "cancel":
        return "cancelled"
    return None


def _words(text: str) -> set[str]:
    return {w.strip("()") for w in text.lower().replace("_", " ").split() if w.strip("()")}


def consistent(spec: ToolSpec, arguments: dict[str, Any], answer: Any, state: EpisodeState) -> tuple[Any, dict]:
    """(the shaped answer, the effect it carries). CPU work on the caller's schema: run it in a worker thread."""
    changed = effect(spec, arguments)
    if not isinstance(answer, (dict, list)):
        return answer, changed
    changes = _changes(spec, arguments, answer, state, changed)
    schema = spec.response_schema
    out = copy.deepcopy(answer)
    for path, value in changes:
        put(out, path, value)
    if not is_valid(schema, out):
        out = copy.deepcopy(answer)
        for path, value in changes:
            trial = copy.deepcopy(out)
            put(trial, path, value)
            if is_valid(schema, trial):
                out = trial
    if is_write(spec.name) and isinstance(out, dict):
        out = _with_effects(spec, arguments, out, _record_for(out, arguments, state, True) is not None, state.world)
    return out, changed


def _with_effects(
    spec: ToolSpec, arguments: dict[str, Any], obj: dict[str, Any], known: bool, world: WorldSeed | None = None
) -> dict[str, Any]:
    """`obj` with what the call does inside it (`sim.effects`), rule by rule, each change kept if the answer stays
    valid; with a world seed, a part the call put in (a modification's new item) then takes its seeded record's fields
    (`seeded_parts`: its price, its options)."""
    before = copy.deepcopy(obj)
    for rule in EFFECTS:
        for path, value in rule(spec, arguments, obj, known):
            trial = copy.deepcopy(obj)
            put(trial, path, value)
            if is_valid(spec.response_schema, trial):
                obj = trial
    for path, value in seeded_parts(spec, before, obj, world):
        trial = copy.deepcopy(obj)
        put(trial, path, value)
        if is_valid(spec.response_schema, trial):
            obj = trial
    return obj


def _changes(spec, arguments, answer, state: EpisodeState, changed: dict[str, Any]) -> list[Change]:
    write = is_write(spec.name)
    roots = [((i,) if isinstance(answer, list) else (), item) for i, item in _roots(answer)]
    changes: list[Change] = []
    context = {k: v for k, v in state.context().items() if k not in arguments}
    for prefix, root in roots:
        own = own_id(root)
        for path in _dict_paths(root, prefix, into_lists=False):
            if path != prefix and own_id(_node(answer, path)) is not None:
                continue  # another object inside this one: not the episode's context
            for key in _keys_at(answer, path):
                if key in context and not (own and key == own[0] and path == prefix):
                    changes.append(((*path, key), context[key]))
    echo = _echo(arguments, answer, roots, write, state.world)
    changes += echo
    for prefix, root in roots:
        record = _record_for(root, arguments, state, prefix == () and not isinstance(answer, list))
        if record is not None:
            for key in list(root):
                if key not in record:
                    changes.append(((*prefix, key), MISSING))
            changes += [((*prefix, key), value) for key, value in record.items() if not key.startswith("__")]
    changes += echo
    if write and isinstance(answer, dict):
        if _record_for(answer, arguments, state, True) is None:  # a new object: its schema's defaults, then the effect
            changes += created_defaults(spec, arguments)
        changes += [((key,), value) for key, value in changed.items()]
    return changes


def _target_argument(key: str, arguments: dict[str, Any]) -> str | None:
    """The `to_…` argument a conversion's answer field names: `unit` ← `to_unit`, `time_zone` ← `to_tz` (initials)."""
    initials = "".join(w[0] for w in key.split("_") if w)
    for name in (f"to_{key}", f"to_{initials}" if len(initials) > 1 else None):
        if name in arguments:
            return name
    return None


def _roots(answer: Any) -> list[tuple[int, dict[str, Any]]]:
    if isinstance(answer, dict):
        return [(0, answer)]
    return [(i, item) for i, item in enumerate(answer) if isinstance(item, dict)]


def _record_for(root, arguments, state: EpisodeState, single: bool) -> dict[str, Any] | None:
    """The recorded object this answer's root is: by its own id, or (a single object) the id the call names."""
    own = own_id(root)
    key = own[0] if own else None
    ident = arguments.get(key) if single and key in arguments else (own[1] if own else None)
    if ident is None and single:
        ident = next(
            (v for k, v in arguments.items() if is_id_key(k) and isinstance(v, str) and v in state.records), None
        )
    record = state.records.get(ident) if isinstance(ident, str) else None
    return record if record and any(not k.startswith("__") for k in record) else None


def _dict_paths(value: Any, prefix: Path, into_lists: bool, depth: int = 0) -> list[Path]:
    """Paths of the dicts inside `value` (itself included), through lists one level when asked."""
    out: list[Path] = []
    if isinstance(value, dict) and depth <= 3:
        out.append(prefix)
        for key, sub in value.items():
            if isinstance(sub, dict):
                out += _dict_paths(sub, (*prefix, key), into_lists, depth + 1)
            elif into_lists and isinstance(sub, list):
                for i, item in enumerate(sub):
                    if isinstance(item, dict):
                        out += _dict_paths(item, (*prefix, key, i), False, depth + 1)
    return out


def _node(answer: Any, path: Path) -> Any:
    for part in path:
        answer = answer[part]
    return answer


def _keys_at(answer: Any, path: Path) -> list[str]:
    return list(_node(answer, path))


def _echo(arguments, answer, roots, write: bool, world: WorldSeed | None = None) -> list[Change]:
    """The request's values where the answer has fields of the same name (a listed object the request names by a
    seeded id, `{flight_number, date}`, also takes the fields of the same name of its seeded record: its origin)."""
    props_scalar = {k: v for k, v in arguments.items() if not isinstance(v, (dict, list))}
    changes: list[Change] = []
    for prefix, root in roots:
        for path in _dict_paths(root, prefix, into_lists=not write):
            for key in _keys_at(answer, path):
                if key in props_scalar:
                    changes.append(((*path, key), props_scalar[key]))
                elif (target := _target_argument(key, props_scalar)) is not None:
                    changes.append(((*path, key), props_scalar[target]))
        for key, value in arguments.items():
            if key not in root:
                continue
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                old = root[key] if isinstance(root[key], list) else []
                merged = []
                for i, item in enumerate(value):
                    base = old[i] if i < len(old) else (old[0] if old else {})
                    base = base if isinstance(base, dict) else {}
                    merged.append({**base, **_seeded_fields(item, base, world), **item})
                changes.append(((*prefix, key), merged))
            elif isinstance(value, (list, dict)):
                changes.append(((*prefix, key), value))
    return changes


def _seeded_fields(item: dict[str, Any], base: dict[str, Any], world: WorldSeed | None) -> dict[str, Any]:
    """The scalar fields of `base` that the seeded record of an id `item` carries hold (none without a seed)."""
    if world is None:
        return {}
    out: dict[str, Any] = {}
    for key, value in item.items():
        kind = world.kind_of(key)
        record = world.kinds[kind].get(value) if kind is not None and isinstance(value, str) else None
        if record is not None:
            out.update(
                {k: copy.deepcopy(v) for k, v in record.items() if k in base and not isinstance(v, (dict, list))}
            )
    return out
