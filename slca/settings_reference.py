"""The settings reference: every key of every registered settings section — dotted name, type, default and the
attribute docstring that documents it — read from the settings classes themselves (`slca config reference`).

`docs/settings.md` is this module's Markdown, written by `slca config reference --write docs/settings.md`;
`tests/slca/test_settings_reference.py` fails when the committed page and the classes disagree. The output depends
on the classes only (not on the loaded configuration, the environment or the machine), so writing it again changes
nothing unless a setting changed. A default built by a named factory function with a docstring (a default that
depends on the machine, such as `common.cache_dir`) is shown as that docstring instead of its value here.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
import types
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from slca.config import sections
from slca.redaction import is_secret

REGENERATE = "slca config reference --write docs/settings.md"
"""The command that rewrites `docs/settings.md` (run from the repository root)."""

UNSET = object()
"""No default value to show (the setting's default is computed: see `Setting.default_note`)."""


@dataclass(frozen=True)
class Setting:
    key: str
    """Dotted name, as `--set` takes it: `serve.port`, `learner.advantage.w_exec`."""
    type: str
    """The annotation, written the way the code reads (`str | None`, `"next" | "prev" | "none"`)."""
    default: Any
    """The default as JSON (None: unset); `UNSET` when `default_note` describes it instead."""
    default_note: str | None
    """How a default that depends on the machine is computed (its factory's docstring)."""
    constraints: tuple[str, ...]
    """Bounds the value is checked against: `≥ 0`, `> 0`, `≤ 1`."""
    secret: bool
    """Printed as `***` by `slca config show` and in logs."""
    doc: str
    """The attribute docstring ('' when the field has none)."""


@dataclass(frozen=True)
class Section:
    name: str
    """`serve`, or a sub-section's dotted name (`learner.advantage`)."""
    cls: str
    """`module:Class` of its settings class."""
    doc: str
    settings: tuple[Setting, ...] = field(default=())


def attribute_docs(cls: type) -> dict[str, str]:
    """Field name → its attribute docstring (the string literal right after `name: type = ...`), over the class
    and its bases, the class's own winning; fields only (a documented `ClassVar`, `MOVED_OUT`, is no setting)."""
    fields = cls.model_fields
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass in (object, BaseModel) or not issubclass(klass, BaseModel):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        node = ast.parse(source).body[0]
        if not isinstance(node, ast.ClassDef):
            continue
        body = node.body
        for stmt, nxt in zip(body, body[1:]):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id in fields
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def type_name(annotation: Any) -> str:
    """An annotation as the code writes it, without module prefixes."""
    if annotation is type(None) or annotation is None:
        return "None"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin is Annotated:
        return type_name(args[0])
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "length ≥"), ("max_length", "length ≤"))


def constraints(info: FieldInfo) -> tuple[str, ...]:
    out = []
    for item in info.metadata:
        for attr, symbol in _BOUNDS:
            value = getattr(item, attr, None)
            if value is not None:
                out.append(f"{symbol} {_json(value)}")
    return tuple(out)


def _json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value), ensure_ascii=False)


def _sub_model(info: FieldInfo) -> type[BaseModel] | None:
    ann = info.annotation
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def _default(info: FieldInfo) -> tuple[Any, str | None]:
    if info.default is not PydanticUndefined:
        return to_jsonable_python(info.default), None
    factory = info.default_factory
    if factory is None:
        return UNSET, "required"
    if inspect.isfunction(factory) and factory.__name__ != "<lambda>" and factory.__doc__:
        return UNSET, " ".join(inspect.cleandoc(factory.__doc__).split())
    return to_jsonable_python(factory()), None


def _class_doc(cls: type) -> str:
    doc = cls.__dict__.get("__doc__") or inspect.getmodule(cls).__doc__ or ""
    return inspect.cleandoc(doc)


def section_tree(name: str, cls: type[BaseModel]) -> list[Section]:
    """The section `name` of settings class `cls`, then its sub-sections (fields whose type is a settings model),
    each followed by its own, in declaration order."""
    docs = attribute_docs(cls)
    own: list[Setting] = []
    subs: list[Section] = []
    for fname, info in cls.model_fields.items():
        key = f"{name}.{fname}"
        sub = _sub_model(info)
        if sub is not None:
            tree = section_tree(key, sub)
            head = tree[0]
            # the sub-model's class docstring, else the field's (not the module's, which names the whole section)
            doc = head.doc if sub.__dict__.get("__doc__") else docs.get(fname) or head.doc
            subs += [Section(head.name, head.cls, doc, head.settings), *tree[1:]]
            continue
        default, note = _default(info)
        own.append(
            Setting(
                key=key,
                type=type_name(info.annotation),
                default=default,
                default_note=note,
                constraints=constraints(info),
                secret=is_secret(cls, fname),
                doc=docs.get(fname, ""),
            )
        )
    return [Section(name, f"{cls.__module__}:{cls.__qualname__}", _class_doc(cls), tuple(own)), *subs]


def _import(path: str) -> type[BaseModel]:
    import importlib

    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@cache
def reference() -> tuple[tuple[Section, ...], tuple[str, ...]]:
    """(every section and sub-section, in order: `common`, then the others by name; the names of registered
    sections whose package is not installed)."""
    known = sections()
    out: list[Section] = []
    missing: list[str] = []
    for name in ["common", *sorted(n for n in known if n != "common")]:
        try:
            cls = _import(known[name])
        except ModuleNotFoundError:
            missing.append(name)
            continue
        out += section_tree(name, cls)
    return tuple(out), tuple(missing)


def all_settings() -> dict[str, Setting]:
    """Dotted key → its `Setting`, every section."""
    return {s.key: s for section in reference()[0] for s in section.settings}


# --- output ---------------------------------------------------------------------------------------------------


def _setting_json(s: Setting) -> dict[str, Any]:
    out = {f: getattr(s, f) for f in Setting.__dataclass_fields__}
    out["constraints"] = list(s.constraints)
    if s.default is UNSET:
        del out["default"]
    return out


def to_json() -> str:
    secs, missing = reference()
    data = {
        "generated_by": REGENERATE.replace("--write docs/settings.md", "--format json"),
        "missing_sections": list(missing),
        "sections": [
            {
                "section": s.name,
                "class": s.cls,
                "doc": s.doc,
                "settings": [_setting_json(x) for x in s.settings],
            }
            for s in secs
        ],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _cell(text: str) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`".replace("|", "\\|")


def _default_cell(s: Setting) -> str:
    if s.default is UNSET:
        return _cell(s.default_note or "")
    if s.default is None:
        return "unset"
    return _code(json.dumps(s.default, ensure_ascii=False))


def _type_cell(s: Setting) -> str:
    extras = [*s.constraints, *(["secret"] if s.secret else [])]
    return _code(s.type) + (f"<br>{', '.join(extras)}" if extras else "")


def _anchor(name: str) -> str:
    """GitHub's anchor of a heading `name` (lower case, punctuation other than `-` and `_` dropped)."""
    return "".join(c for c in name.lower().replace(" ", "-") if c.isalnum() or c in "-_")


HEADER = """\
# Settings reference

<!-- Generated by `{cmd}` from the settings classes: do not edit by hand.
     tests/slca/test_settings_reference.py fails when this page and the code disagree. -->

Every setting of every section, read from its settings class (`common`: `slca/config.py`; `weights`:
`slca/weights/settings.py`; each component's `<component>/settings.py`, registered as a `slca.settings` entry point
in `pyproject.toml`). Generated by
`{cmd}`; `slca config reference --format json` prints the same as JSON.

Set a key in `slca.toml` (`[serve]` then `port = 8001`; a sub-section is a table of its own, `[learner.loss]`), in
the environment (`SLCA_SERVE__PORT=8001`, `SLCA_LEARNER__LOSS__KL_BETA=0.1`; a `common` key also as
`SLCA_<KEY>`, e.g. `SLCA_REDIS_URL`) or on the command line (`slca --set serve.port=8001 …`); later sources win,
in that order (`slca/config.py`). `slca config show` prints the effective values. Defaults are written as JSON
(what `--set` and the environment accept); *unset* is `None`. A *secret* setting is printed as `***` by
`slca config show` and in logs.
"""


def to_markdown() -> str:
    secs, missing = reference()
    lines = [HEADER.format(cmd=REGENERATE)]
    if missing:
        lines.append(f"**Incomplete:** sections not installed here: {', '.join(missing)}.\n")
    lines.append("| section | settings |\n|---|---|")
    for s in secs:
        lines.append(f"| [{s.name}](#{_anchor(s.name)}) | {len(s.settings)} |")
    lines.append("")
    for s in secs:
        level = "##" if "." not in s.name else "###"
        lines.append(f"{level} {s.name}\n")
        lines.append(f"`{s.cls}`" + (f": {' '.join(s.doc.split())}" if s.doc else "") + "\n")
        if not s.settings:
            continue
        lines.append("| key | type | default | meaning |\n|---|---|---|---|")
        for x in s.settings:
            doc = _cell(x.doc) or "*(undocumented)*"
            lines.append(f"| `{x.key}` | {_type_cell(x)} | {_default_cell(x)} | {doc} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def render(fmt: str = "md") -> str:
    return to_json() if fmt == "json" else to_markdown()
