"""JSON values by path: the leaves of a value, a value at a path, setting one, and where two values differ (SGLS
shapes answers with these; `slca sim fidelity` measures with them).

A path is a tuple of dict keys and list indices. A leaf is a scalar (string, number, boolean, null) or an empty
container; a container's leaves stand for it.
"""

from __future__ import annotations

import copy
from typing import Any

Path = tuple[Any, ...]
MISSING = object()


def leaves(value: Any, prefix: Path = ()) -> dict[Path, Any]:
    """{path: scalar} for every leaf of `value`."""
    if isinstance(value, dict) and value:
        out: dict[Path, Any] = {}
        for key, sub in value.items():
            out.update(leaves(sub, (*prefix, key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, sub in enumerate(value):
            out.update(leaves(sub, (*prefix, index)))
        return out
    return {prefix: value}


def at(value: Any, path: Path) -> Any:
    """The value at `path`, or MISSING."""
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            return MISSING
    return value


def put(root: Any, path: Path, value: Any) -> None:
    """Set `root` at `path` (in place), making the dicts and list items on the way; MISSING removes the leaf."""
    node = root
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        empty: Any = [] if isinstance(nxt, int) else {}
        if isinstance(node, dict):
            if not isinstance(node.get(part), (dict, list)):
                node[part] = empty
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int):
            while len(node) <= part:
                node.append(copy.deepcopy(empty))
            if not isinstance(node[part], (dict, list)):
                node[part] = empty
            node = node[part]
        else:
            return
    last = path[-1] if path else None
    if isinstance(node, dict):
        if value is MISSING:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    elif isinstance(node, list) and isinstance(last, int):
        if value is MISSING:
            if 0 <= last < len(node):
                node[last] = None
            return
        while len(node) <= last:
            node.append(None)
        node[last] = copy.deepcopy(value)


def differences(a: Any, b: Any, prefix: Path = ()) -> list[Path]:
    """The leaf paths where `a` and `b` differ (one side may lack the path). Equal subtrees are skipped whole."""
    if a is b or (type(a) is type(b) and a == b):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[Path] = []
        for key in list(a) + [k for k in b if k not in a]:
            out.extend(differences(a.get(key, MISSING), b.get(key, MISSING), (*prefix, key)))
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(max(len(a), len(b))):
            out.extend(differences(a[i] if i < len(a) else MISSING, b[i] if i < len(b) else MISSING, (*prefix, i)))
        return out
    if isinstance(a, (dict, list)) and a and not isinstance(b, (dict, list)):
        return [(*prefix, *p) for p in leaves(a)]
    if isinstance(b, (dict, list)) and b and not isinstance(a, (dict, list)):
        return [(*prefix, *p) for p in leaves(b)]
    return [] if same(a, b) else [prefix]


def same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but a boolean equals only a boolean."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if a is MISSING or b is MISSING:
        return a is b
    return type(a) is type(b) and a == b if isinstance(a, (dict, list)) or isinstance(b, (dict, list)) else a == b


def text(path: Path) -> str:
    """A path as one string (`a/0/b`), for the records."""
    return "/".join(str(p) for p in path)
