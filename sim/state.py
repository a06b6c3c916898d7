"""Episode state of SGLS: what earlier calls of one episode created, wrote and returned.

Why: a simulated API must agree with itself within an episode. An id created by `book_*` must be found
by `get_*`; an `update_*` must be visible to the next read; a deleted object is gone (404). The state is
a map from id values to the fields known about that object; responses are overlaid with those fields.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from sim.schemas import canonical_json, digest, is_valid

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
DELETED = "__deleted__"


def is_id_key(key: str) -> bool:
    """`id`, `user_id`, `userId` — not `paid` or `valid`."""
    return key.lower() == "id" or key.lower().endswith("_id") or (len(key) > 2 and key.endswith("Id"))


def verb_of(tool: str) -> str:
    return tool.lower().split("_", 1)[0]


def is_write(tool: str) -> bool:
    return verb_of(tool) in WRITE_VERBS


@dataclass
class EpisodeState:
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    """Earlier calls `{name, arguments, content}` (shown to the llm backend)."""

    def fingerprint(self) -> str:
        return digest(canonical_json(self.records))

    def referenced_ids(self, arguments: Any) -> list[str]:
        if not isinstance(arguments, dict):
            return []
        return [v for k, v in arguments.items() if is_id_key(k) and isinstance(v, str) and v in self.records]

    def deleted(self, arguments: Any) -> str | None:
        """The id of a deleted object the call refers to, if any (reads of it answer 404)."""
        return next((i for i in self.referenced_ids(arguments) if self.records[i].get(DELETED)), None)

    def known_fields(self, tool: str, arguments: Any) -> dict[str, Any]:
        """Fields a response to this call must agree with: recorded objects, then the call's own values."""
        known: dict[str, Any] = {}
        for ident in self.referenced_ids(arguments):
            known.update({k: v for k, v in self.records[ident].items() if k != DELETED})
        if isinstance(arguments, dict):
            known.update(arguments)
        if verb_of(tool) == "cancel":
            known["status"] = "cancelled"
        return known

    def overlay(self, response: Any, schema: dict[str, Any] | None, known: dict[str, Any]) -> Any:
        """`response` with matching fields replaced by known values, keeping it valid against `schema`."""
        if not known or not isinstance(response, dict):
            return response
        out = copy.deepcopy(response)
        for target in _dicts(out):
            for key in list(target):
                if key in known and target[key] != known[key]:
                    before = target[key]
                    target[key] = copy.deepcopy(known[key])
                    if not is_valid(schema, out):
                        target[key] = before
        return out

    def record(self, tool: str, arguments: Any, content: Any) -> None:
        """Remember what this call created, changed or revealed, under every id it mentions."""
        args = arguments if isinstance(arguments, dict) else {}
        fields: dict[str, Any] = {}
        if isinstance(content, dict):
            for target in reversed(_dicts(content)):
                fields.update({k: v for k, v in target.items() if not isinstance(v, (dict, list))})
        if is_write(tool):
            fields.update(args)
        if verb_of(tool) == "cancel":
            fields["status"] = "cancelled"
        ids = {v for k, v in {**fields, **args}.items() if is_id_key(k) and isinstance(v, str)}
        for ident in ids:
            entry = self.records.setdefault(ident, {})
            entry.update(copy.deepcopy(fields))
            if verb_of(tool) in DELETE_VERBS and ident in args.values():
                entry[DELETED] = True
        self.history.append({"name": tool, "arguments": args, "content": content})


def _dicts(value: Any, depth: int = 0) -> list[dict[str, Any]]:
    """The dict itself and dicts nested in it (not inside lists: list items are distinct objects)."""
    if not isinstance(value, dict) or depth > 3:
        return []
    out = [value]
    for sub in value.values():
        out.extend(_dicts(sub, depth + 1))
    return out
