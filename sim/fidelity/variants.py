"""The failure set: broken variants of an episode's expected calls, placed in the episode beside them.

Before the first call of each tool: the call with a required argument dropped, an argument of the wrong type, a value
outside the schema's enum or outside the values its description lists, a malformed date or time zone, an unknown id
(malformed: not shaped like the documented example; well-formed: shaped like it), two item lists that no longer
pair up. After each state-changing call: the same call again (a second cancellation, a second return...), which the
domain's rules may refuse. Whether a variant fails is never assumed: the real tool's answer is the label.

At the end of the episode (`with_reads_again`): the episode's first expected reads asked again, so that the
consistency measure has statements to compare (the τ² flows seldom read one object twice): a simulator must state
the same object the same way when nothing changed it, and as its own state-changing answers left it when something did.
"""

from __future__ import annotations

import re
from typing import Any

from sim.fidelity.episodes import Episode, Step
from sim.real import RealTool
from sim.state import is_id_key

LISTED = re.compile(r"(?:either|one of)\s+((?:'[^']*'[\s,]*(?:or\s+)?)+)", re.IGNORECASE)
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def with_failure_set(episode: Episode, tools: dict[str, RealTool]) -> Episode:
    """The episode with its broken variants inserted (each step labelled by the variant that made it)."""
    steps: list[Step] = []
    seen: set[str] = set()
    for step in episode.steps:
        tool = tools[step.tool]
        if step.tool not in seen:
            seen.add(step.tool)
            steps.extend(Step(step.tool, args, label) for label, args in broken(step.arguments, tool.parameters))
        steps.append(step)
        if tool.kind == "write":
            steps.append(Step(step.tool, dict(step.arguments), "repeated write"))
    return Episode(episode.domain, episode.episode_id, steps)


READ_AGAIN = "read again"
READS_AGAIN = 3
"""At most this many distinct reads are asked again per episode (each costs a simulated call)."""


def with_reads_again(episode: Episode, tools: dict[str, RealTool], limit: int = READS_AGAIN) -> Episode:
    """The episode with its first `limit` distinct expected reads asked again at its end (label `READ_AGAIN`)."""
    again: list[Step] = []
    for step in episode.steps:
        if step.label != "expected" or tools[step.tool].kind != "read" or len(again) >= limit:
            continue
        if all((s.tool, s.arguments) != (step.tool, step.arguments) for s in again):
            again.append(Step(step.tool, dict(step.arguments), READ_AGAIN))
    return Episode(episode.domain, episode.episode_id, [*episode.steps, *again])


def broken(args: dict[str, Any], schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    props: dict[str, Any] = schema.get("properties", {})
    out: list[tuple[str, dict[str, Any]]] = []
    required = [k for k in schema.get("required", []) if k in args]
    if required:
        out.append(("missing argument", {k: v for k, v in args.items() if k != required[0]}))
    if args:
        key = next(iter(args))
        out.append(("wrong type", {**args, key: mistyped(args[key])}))
    for key, value in args.items():
        sub = props.get(key, {})
        if isinstance(sub.get("enum"), list):
            out.append(("outside the enum", {**args, key: "none_of_these"}))
            break
    for key, value in args.items():
        if isinstance(value, str) and LISTED.search(str(props.get(key, {}).get("description", ""))):
            out.append(("outside the documented values", {**args, key: "some other reason"}))
            break
    for key, value in args.items():
        if isinstance(value, str) and DATE.match(value):
            out.append(("malformed date", {**args, key: value[:5] + "02-30"}))
            break
    for key, value in args.items():
        if isinstance(value, str) and ("tz" in key.lower() or "zone" in key.lower()):
            out.append(("unknown time zone", {**args, key: "Mars/Olympus_Mons"}))
            break
    ids = [k for k, v in args.items() if is_id_key(k) and isinstance(v, str) and v]
    if ids:
        key = ids[0]
        out.append(("unknown id (malformed)", {**args, key: "ZZ" + args[key][::-1] + "9"}))
        out.append(("unknown id (well-formed)", {**args, key: shifted(args[key])}))
    lists = [k for k, v in args.items() if k.endswith("_ids") and isinstance(v, list) and v]
    if len(lists) >= 2 and len(args[lists[0]]) == len(args[lists[1]]):
        out.append(("lists that do not pair up", {**args, lists[1]: args[lists[1]][:-1]}))
    return out


def mistyped(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, str):
        return 12345
    if isinstance(value, (int, float)):
        return "twelve"
    return "x"


def shifted(text: str) -> str:
    """Another id of the same shape: each digit and letter moved along its own alphabet, separators kept."""
    out = []
    for ch in text:
        if ch.isdigit():
            out.append(str((int(ch) + 3) % 10))
        elif "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + 7) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + 7) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)
