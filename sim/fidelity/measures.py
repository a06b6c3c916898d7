"""The five measures of one replayed episode, call by call, by program (no judge).

- shape: a simulated success validates against the tool's response schema;
- errors: does the call fail on each side, and with the same kind (`sim.errors`);
- derived fields (calls that change nothing): each leaf of the real answer whose value the episode already holds
  (in this call's arguments, in an earlier call's arguments, or in an earlier real answer) must have the same
  value at the same path of the simulated answer. "Holds": under the same field name (for an earlier answer: the
  same field of the same entity), or anywhere for a distinctive string (4+ characters with a digit: an id, an
  address, a date). A value only an earlier *real* answer held, which the simulator did not state too, is
  counted apart (`unseen`): no simulator could know it;
- state change: the change the simulated answer implies (what it states about the entity, less what it stated
  before about it; everything it states about an entity it never stated before) is replayed on a copy of the real
  database as it was before the call, and compared with the real database after it, field by field, over every
  field either side changed (`real_changed` marks those the real call changed, `described` the calls on an entity
  the simulator had stated before: on one it never stated, every field it states is its own invention);
- consistency: a field of an entity the simulator stated earlier in the episode is stated the same later, when no
  state-changing call naming that entity came between (the episode's reads asked again at its end,
  `variants.with_reads_again`, give every episode such statements; they are not scored as derived fields).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from sim.bounds import DEFAULT_LIMITS
from sim.errors import error_kind
from sim.jsonpath import MISSING, Path, at, differences, leaves, put, same, text
from sim.fidelity.replay import Call
from sim.fidelity.variants import READ_AGAIN
from sim.schemas import canonical_json, is_valid
from sim.state import is_id_key


CHECK_LIMITS = replace(DEFAULT_LIMITS, deadline_s=120.0)
"""The shape check's bounds: the schemas are the real tools', and a busy machine must not turn a slow check into a
miss (the simulator's own 0.5 s step deadline is its business, not the measure's)."""


def distinctive(value: Any) -> bool:
    """A string that matches another value whatever its field: 4+ characters with a digit (an id, an address, a
    date). Others ('basic_economy', 'SFO', 'payment', a name) match only under the same field name."""
    return isinstance(value, str) and len(value) >= 4 and any(c.isdigit() for c in value)


def entities(content: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(id key, id, object) of the objects an answer is about: the answer itself, or the items of a list answer."""
    items = content if isinstance(content, list) else [content]
    out = []
    for item in items:
        if isinstance(item, dict):
            key = next((k for k, v in item.items() if is_id_key(k) and isinstance(v, str) and v), None)
            if key is not None:
                out.append((key, item[key], item))
    return out


class Provenance:
    """Values an episode holds, by (key, value) and, for strings long enough, by value alone."""

    def __init__(self) -> None:
        self.keyed: set[tuple[str, str]] = set()
        self.strings: set[str] = set()

    def add(self, value: Any) -> None:
        for path, leaf in leaves(value).items():
            if isinstance(leaf, bool) or leaf is None or isinstance(leaf, (dict, list)):
                continue
            key = next((p for p in reversed(path) if isinstance(p, str)), "")
            self.keyed.add((key, canonical_json(leaf)))
            if distinctive(leaf):
                self.strings.add(leaf)

    def holds(self, key: str, leaf: Any) -> bool:
        if (key, canonical_json(leaf)) in self.keyed:
            return True
        return distinctive(leaf) and leaf in self.strings


@dataclass
class Scored:
    """One call's record: what happened on each side and what each measure found."""

    call: Call
    shape: bool | None = None
    derived: list[dict[str, Any]] = field(default_factory=list)
    unseen: int = 0
    state: list[dict[str, Any]] = field(default_factory=list)
    consistency: list[dict[str, Any]] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        c = self.call
        return {
            "index": c.index,
            "tool": c.tool,
            "kind": c.kind,
            "label": c.label,
            "arguments": c.arguments,
            "real": _side(c.real),
            "sim": {**_side(c.sim), "source": c.sim.meta.get("source"), "latency_ms": round(1000 * c.sim.latency_s, 3)},
            "shape": self.shape,
            "derived": self.derived,
            "derived_unseen": self.unseen,
            "state": self.state,
            "consistency": self.consistency,
        }


def _side(result) -> dict[str, Any]:
    return {"ok": result.ok, "status": result.status, "error_kind": error_kind(result), "error": result.error}


class EpisodeScorer:
    """Walks one episode's calls in order, keeping what earlier calls established."""

    def __init__(self, schemas: dict[str, dict[str, Any] | None]):
        self.schemas = schemas
        self.requests = Provenance()
        self.real_strings: set[str] = set()
        self.sim_strings: set[str] = set()
        self.real_stated: dict[tuple[str, Path], Any] = {}
        """(entity id, path in it) → the value the real tool last stated there."""
        self.belief: dict[str, dict[str, Any]] = {}
        """id → the simulator's latest statement of that entity."""
        self.stated: dict[tuple[str, Path], tuple[Any, int]] = {}
        """(entity id, path in it) → (the value the simulator last stated there, at which call)."""
        self.changed_at: dict[str, int] = {}
        """id → the last state-changing call that named it (in its arguments or either answer)."""

    def score(self, call: Call) -> Scored:
        out = Scored(call)
        if call.sim.ok:
            out.shape = is_valid(self.schemas.get(call.tool), call.sim.content, CHECK_LIMITS)
        changes = call.kind == "write"
        if not changes and call.real.ok and call.sim.ok and call.label != READ_AGAIN:
            self._derived(call, out)  # a read asked again is the consistency measure's: not counted twice
        if changes and call.real.ok and call.before is not None and call.after is not None:
            out.state = self._state(call)
        if call.sim.ok:
            self._consistency(call, out, changes)
        self.requests.add(call.arguments)
        if call.real.ok:
            self.real_strings |= _strings(call.real.content)
            for _, ident, obj in entities(call.real.content):
                self.real_stated.update({(ident, p): v for p, v in leaves(obj).items()})
        if call.sim.ok:
            self.sim_strings |= _strings(call.sim.content)
            for _, ident, obj in entities(call.sim.content):
                self.belief[ident] = obj
        if changes and (call.real.ok or call.sim.ok):
            named = _strings(call.arguments) | _strings(call.real.content if call.real.ok else None)
            named |= _strings(call.sim.content if call.sim.ok else None)
            self.changed_at.update({ident: call.index for ident in named})
        return out

    def _derived(self, call: Call, out: Scored) -> None:
        here = Provenance()
        here.add(call.arguments)
        within = _entity_paths(call.real.content)
        for path, leaf in leaves(call.real.content).items():
            if isinstance(leaf, bool) or leaf is None or isinstance(leaf, (dict, list)):
                continue
            key = next((p for p in reversed(path) if isinstance(p, str)), "")
            if here.holds(key, leaf):
                source = "request"
            elif self.requests.holds(key, leaf):
                source = "earlier request"
            elif self._answered(within.get(path), leaf):
                if not self._sim_knew(within.get(path), leaf):
                    out.unseen += 1
                    continue
                source = "earlier answer"
            else:
                continue
            got = at(call.sim.content, path)
            out.derived.append(
                {
                    "path": text(path),
                    "source": source,
                    "real": leaf,
                    "sim": None if got is MISSING else got,
                    "agree": got is not MISSING and same(got, leaf),
                }
            )

    def _answered(self, where: tuple[str, Path] | None, leaf: Any) -> bool:
        """An earlier real answer stated this value: for this field of this entity, or (a long string) anywhere."""
        if where is not None and where in self.real_stated and same(self.real_stated[where], leaf):
            return True
        return distinctive(leaf) and leaf in self.real_strings

    def _sim_knew(self, where: tuple[str, Path] | None, leaf: Any) -> bool:
        """The simulator stated the same value earlier (for this field of this entity, or a long string anywhere)."""
        if where is not None and where in self.stated and same(self.stated[where][0], leaf):
            return True
        return distinctive(leaf) and leaf in self.sim_strings

    def _state(self, call: Call) -> list[dict[str, Any]]:
        before, real_after = call.before, call.after
        touched: dict[Path, Any] = {}  # (table, id) → the record as the simulator's answer leaves it
        described = any(ident in self.belief for _, ident, _ in entities(call.sim.content)) if call.sim.ok else False
        if call.sim.ok:
            for id_key, ident, obj in entities(call.sim.content):
                base = _record_path(before, id_key, ident)
                if base is None:
                    continue
                prior = self.belief.get(ident)
                paths = differences(prior, obj) if prior is not None else list(leaves(obj))
                record = touched.get(base, copy.deepcopy(at(before, base)))
                record = {} if record is MISSING or not isinstance(record, dict) else record
                for p in paths:
                    put(record, p, at(obj, p))
                touched[base] = record
            touched = _align_created(before, real_after, touched)
        real_changed = differences(before, real_after)
        changed_by_real = set(real_changed)
        sim_changed = [(*base, *p) for base, record in touched.items() for p in differences(at(before, base), record)]
        fields = []
        for path in dict.fromkeys([*real_changed, *sim_changed]):
            real_value = at(real_after, path)
            base = path[:2]
            sim_value = at(touched[base], path[2:]) if base in touched else at(before, path)
            fields.append(
                {
                    "path": text(path),
                    "real": None if real_value is MISSING else real_value,
                    "sim": None if sim_value is MISSING else sim_value,
                    "agree": same(real_value, sim_value),
                    "real_changed": path in changed_by_real,
                    "described": described,
                }
            )
        return fields

    def _consistency(self, call: Call, out: Scored, changes: bool) -> None:
        for _, ident, obj in entities(call.sim.content):
            for path, value in leaves(obj).items():
                key = (ident, path)
                earlier = self.stated.get(key)
                if earlier is not None and not changes and earlier[1] >= self.changed_at.get(ident, -1):
                    out.consistency.append(
                        {
                            "entity": ident,
                            "path": text(path),
                            "earlier": earlier[0],
                            "later": value,
                            "agree": same(earlier[0], value),
                        }
                    )
                self.stated[key] = (value, call.index)


def _strings(value: Any) -> set[str]:
    return {v for v in leaves(value).values() if distinctive(v)}


def _entity_paths(content: Any) -> dict[Path, tuple[str, Path]]:
    """Each leaf path of an answer inside one of its entities → (that entity's id, the path within it)."""
    out: dict[Path, tuple[str, Path]] = {}
    items = list(enumerate(content)) if isinstance(content, list) else [(None, content)]
    for index, item in items:
        found = entities(item)
        if found:
            _, ident, obj = found[0]
            prefix = () if index is None else (index,)
            out.update({(*prefix, *p): (ident, p) for p in leaves(obj)})
    return out


def _record_path(database: dict[str, Any], id_key: str, ident: str) -> Path | None:
    """Where the entity `ident` lives in the database (table, id), or where a new one of its kind would go."""
    for table, records in database.items():
        if isinstance(records, dict) and ident in records:
            return (table, ident)
    for table, records in database.items():
        if isinstance(records, dict) and records:
            first = next(iter(records.values()))
            if isinstance(first, dict) and id_key in first and first.get(id_key) == next(iter(records)):
                return (table, ident)
    return None


def _align_created(before: dict[str, Any], after: dict[str, Any], touched: dict[Path, Any]) -> dict[Path, Any]:
    """A record the simulator created under its own id is compared with the one the real tool created (if one)."""
    out = dict(touched)
    for table, sim_id in [b for b in touched if b[1] not in before.get(b[0], {})]:
        real_new = [k for k in after.get(table, {}) if k not in before.get(table, {})]
        if len(real_new) == 1 and real_new[0] != sim_id:
            out[(table, real_new[0])] = out.pop((table, sim_id))
    return out
