"""The four checks of the final reply (docs/design.md#hierr): the rule judge's levels, and every one of them a
condition of `success` whatever judge rates `r_pref` (a reply dumping raw JSON, inventing a number or running on
for pages is not a task done, however right its facts)."""

from __future__ import annotations

import re

from slca.contracts import GroundTruth
from workers.scoring.extract import Observed
from workers.scoring.reply import answers, grounded
from workers.settings import WorkerSettings

_JSONISH = re.compile(r"[\{\[]\s*\"|<tool_(call|response)>")


def reply_checks(obs: Observed, gt: GroundTruth | None, s: WorkerSettings, messages: list[dict]) -> dict[str, float]:
    """`pref_grounded` (every number it states comes from the tool results or the user, and it cites one of their
    values when there are any), `pref_answers` (`workers.scoring.reply.answers`), `pref_no_raw_json` (no JSON object
    or tool markup), `pref_length` (`sensible_length`); 1.0 when it holds, else 0.0."""
    reply = obs.reply.strip()
    users = [m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    vouched = gt.facts if gt is not None and not gt.tool_needed else []  # a no-tool answer is the model's knowledge
    return {
        "pref_grounded": float(bool(reply) and grounded(reply, obs.tool_results, users, vouched)),
        "pref_answers": float(answers(reply, gt, acted=obs.ran_calls > 0)),
        "pref_no_raw_json": float(bool(reply) and not _JSONISH.search(reply)),
        "pref_length": float(sensible_length(reply, gt.facts if gt else [], s)),
    }


def sensible_length(reply: str, facts: list[str], s: WorkerSettings) -> bool:
    """Between `workers.rule_min_chars` and `rule_max_chars` characters; a reply need not be longer than its key
    facts ("32." answers "What is the freezing point of water in Fahrenheit?")."""
    shortest = min(s.rule_min_chars, len(" ".join(facts))) if facts else s.rule_min_chars
    return shortest <= len(reply) <= s.rule_max_chars


def all_hold(checks: dict[str, float]) -> bool:
    return all(v == 1.0 for v in checks.values())
