"""A world seed: the entities that exist, given to SGLS so that it knows what a database would (issue 38).

Why: without one the simulator has no world. A well-formed id the database lacks is answered as if it existed, and a
state-changing call on an object it never stated invents the whole object. With a seed (`WorldSeed`, optional: an
unseeded simulator behaves as before), per episode (`sim.state.EpisodeState.world`):
- a call naming an id of a kind the seed holds (`user_id`, `order_id`, the `item_ids` of a list...) that is neither
  in the seed nor stated by this episode (an object it created) is refused as not found (404, `sim.rules`);
- a call naming a seeded id answers that object's seeded record (the episode adopts a copy of it: the same layer
  as an object it stated itself, `sim.answer`), and a state change applies to that copy, never to the seed;
- a lookup of an id by its object's fields (`find_user_id_by_email`) answers the id of the one seeded object whose
  fields match (the first, as a search of the table would), or not found.

A seeded simulator knows the database: its figures are not those of a simulator that does not (`slca sim fidelity
--world-seed both` measures the two side by side). A seed comes from data already on the machine (a file of this
contract, or a τ² domain's own database in its installed package: `sim.real.tau2.world_seed`), never fetched at
run time. It is handed to the provider (`make_provider(..., world=seed)`), or named by the setting `sim.world_seed`
(`sim.world_seeds.load_world_seed`: a τ² domain's name or the path of a file of this contract), which `slca up` and
serve check when their settings load.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from sim.schemas import canonical_json, digest

WORLD_VERSION = 1
"""Bump on an incompatible change of `WorldSeed`; readers refuse another version."""


class WorldSeed(BaseModel):
    """The objects that exist, by kind (the field that names an object's id: `user_id`, `order_id`) and id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = WORLD_VERSION
    source: str = ""
    """Where it came from (`tau2:airline`, a file name), for the records."""
    kinds: dict[str, dict[str, dict[str, Any]]]
    """kind (an id field) → id → the object's record, as the real API states it."""

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != WORLD_VERSION:
            raise ValueError(f"world seed version {value}; this reader understands {WORLD_VERSION}")
        return value

    @classmethod
    def from_tables(cls, tables: dict[str, Any], source: str = "") -> "WorldSeed":
        """A seed from a database dumped as JSON: every mapping of id → object whose object carries that id in a
        field of its own (`users: {"mia_li_3668": {"user_id": "mia_li_3668", ...}}`), at any depth. A mapping whose
        id field is plain `id` takes its kind from its name (`payment_methods` → `payment_method_id`)."""
        kinds: dict[str, dict[str, dict[str, Any]]] = {}
        _collect(tables, "", kinds)
        return cls(source=source, kinds=kinds)

    @cached_property
    def digest(self) -> str:
        """A short digest of the whole seed (episode fingerprints carry it: a cached answer is the seed's own)."""
        return digest(canonical_json(self.kinds))

    def kind_of(self, key: str) -> str | None:
        """The kind an argument names: itself (`order_id`), or one id of a list (`item_ids`, `new_item_ids`)."""
        stem = key.removeprefix("new_").removeprefix("old_")
        names = [key, stem, *(k[:-1] for k in (key, stem) if k.endswith("_ids"))]
        return next((name for name in names if name in self.kinds), None)

    def exists(self, kind: str, ident: str) -> bool:
        return ident in self.kinds.get(kind, {})

    def record(self, ident: str, kind: str | None = None) -> dict[str, Any] | None:
        """The record of `ident`, of `kind` or of whichever kind holds it (the caller copies it before changing it)."""
        for name, objects in self.kinds.items():
            if ident in objects and kind in (None, name):
                return objects[ident]
        return None

    def find(self, kind: str, fields: dict[str, Any]) -> list[str]:
        """The ids of `kind` whose record holds every (field name, value) of `fields`, at any depth (strings
        compared without case, as the τ² lookups do)."""
        wanted = {k: _folded(v) for k, v in fields.items()}
        return [ident for ident, rec in self.kinds.get(kind, {}).items() if _holds(rec, wanted)]

    def search(self, arguments: dict[str, Any], item: dict[str, Any]) -> list[dict[str, Any]] | None:
        """What a search by `arguments` (`search_direct_flight`: origin, destination, date) that answers a list of
        `item` (an object schema, its properties resolved) finds, in the seed's order; None when no kind's records
        carry these arguments. A record matches when each argument is a field it holds with that value or a key of
        one of its mappings (`dates: {"2024-05-26": {...}}`, whose entry then adds its fields); it is listed with the
        fields `item` has, and left out where the item's schema cannot state it (a `status` the schema's const or
        enum excludes: a search for flights to book lists the available ones) or lacks a required field."""
        props = item.get("properties") or {}
        kind = _searched_kind(self.kinds, arguments, props)
        if kind is None:
            return None
        found = []
        for record in self.kinds[kind].values():
            fields = _matched(record, arguments)
            if fields is not None and (listed := _as_item(fields, props, item.get("required") or [])) is not None:
                found.append(listed)
        return found


def read_file(path: Path) -> WorldSeed:
    try:
        return WorldSeed.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise ValueError(
            f"world seed file {str(path)!r} is not a world seed (sim.world.WorldSeed, JSON): {exc}"
        ) from exc


def _collect(value: Any, name: str, kinds: dict[str, dict[str, dict[str, Any]]]) -> None:
    if isinstance(value, list):
        for item in value:
            _collect(item, name, kinds)
        return
    if not isinstance(value, dict):
        return
    key = _id_field(value)
    if key is None:
        for sub_name, sub in value.items():
            _collect(sub, sub_name, kinds)
        return
    kind = f"{_singular(name)}_id" if key == "id" and name else key
    for ident, obj in value.items():
        kinds.setdefault(kind, {}).setdefault(ident, obj)
        _collect(obj, "", kinds)  # objects inside objects (a product's variants, a user's payment methods)


def _id_field(mapping: dict[str, Any]) -> str | None:
    """The field each object of an id → object mapping names its id in, or None if this is no such mapping."""
    if not mapping or not all(isinstance(v, dict) for v in mapping.values()):
        return None
    first_id, first = next(iter(mapping.items()))
    key = next((k for k, v in first.items() if v == first_id and isinstance(v, str)), None)
    if key is None or not all(obj.get(key) == ident for ident, obj in mapping.items()):
        return None
    return key


def _singular(name: str) -> str:
    return name[:-1] if name.endswith("s") else name


def _folded(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _holds(record: dict[str, Any], wanted: dict[str, Any]) -> bool:
    found: dict[str, bool] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in wanted and not isinstance(v, (dict, list)) and _folded(v) == wanted[k]:
                    found[k] = True
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(record)
    return len(found) == len(wanted)


def _mappings(record: dict[str, Any]) -> list[str]:
    """The fields of a record that map keys to objects (a flight's `dates`)."""
    return [k for k, v in record.items() if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values())]


def _searched_kind(kinds: dict[str, dict[str, dict[str, Any]]], arguments: dict[str, Any], props: dict[str, Any]):
    """The kind whose records a search reads: one whose records hold some argument as a field (the others as keys of
    a mapping) and share the most fields with the listed item."""
    best, best_overlap = None, 1
    for kind, objects in kinds.items():
        sample = next(iter(objects.values()), {})
        fields = [a for a in arguments if a in sample]
        if not fields or (len(fields) < len(arguments) and not _mappings(sample)):
            continue
        overlap = len(set(sample) & set(props))
        if overlap > best_overlap:
            best, best_overlap = kind, overlap
    return best


def _matched(record: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The record's fields, with those of each mapping entry an argument keys, if every argument matches; else None."""
    fields = {k: v for k, v in record.items() if k not in _mappings(record)}
    for key, value in arguments.items():
        if key in record:
            if isinstance(record[key], (dict, list)) or _folded(record[key]) != _folded(value):
                return None
            continue
        entry = next(
            (record[m][value] for m in _mappings(record) if isinstance(value, str) and value in record[m]), None
        )
        if entry is None:
            return None
        fields.update(entry)
    return fields


def _as_item(fields: dict[str, Any], props: dict[str, Any], required: list[str]) -> dict[str, Any] | None:
    out = {k: v for k, v in fields.items() if k in props}
    out |= {k: prop["default"] for k, prop in props.items() if k not in out and "default" in prop}  # as APIs dump it
    for key, prop in props.items():
        allowed = [prop["const"]] if "const" in prop else prop.get("enum")
        if key in out and allowed is not None and out[key] not in allowed:
            return None
    return out if all(k in out for k in required) else None
