"""Preference judges: rate the final reply given the tool results on five levels (0, .25, .5, .75, 1).

A registry by name (`WorkerSettings.judge`): `rule` (deterministic, offline default) and `openai` (any
OpenAI-compatible endpoint: our own API or a vLLM server). Each returns a `Verdict` with its components.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from slca.contracts import GroundTruth
from workers.scoring.checks import reply_checks
from workers.scoring.extract import Observed
from workers.settings import WorkerSettings

LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


class TransientJudgeError(RuntimeError):
    """The judge could not be reached (connection, timeout, 429, 5xx): retrying later may succeed."""


@dataclass
class Verdict:
    score: float
    components: dict[str, float] = field(default_factory=dict)


Judge = Callable[[Observed, GroundTruth | None, WorkerSettings, list[dict]], Verdict]
JUDGES: dict[str, Judge] = {}


def register(name: str):
    def deco(fn: Judge) -> Judge:
        JUDGES[name] = fn
        return fn

    return deco


def get_judge(name: str) -> Judge:
    try:
        return JUDGES[name]
    except KeyError:
        raise ValueError(f"unknown judge {name!r}; known: {', '.join(sorted(JUDGES))}") from None


@register("rule")
def rule_judge(obs: Observed, gt: GroundTruth | None, s: WorkerSettings, messages: list[dict]) -> Verdict:
    """The reply's four checks (`workers.scoring.checks`: grounded, answers, no raw JSON, sensible length), one
    level each. An empty reply is level 0."""
    checks = reply_checks(obs, gt, s, messages)
    score = LEVELS[int(sum(checks.values()))] if obs.reply.strip() else 0.0
    return Verdict(score, checks)


JUDGE_PROMPT = """You rate the final reply of a tool-using assistant.
User request:
{question}

Tool results the assistant received:
{results}

Final reply:
{reply}

Rate the reply on five levels: 1 = very poor, 2 = poor, 3 = acceptable, 4 = good, 5 = excellent.
A good reply answers the request, is grounded in the tool results (no invented facts), states the key values
in plain language (no raw JSON), and has a sensible length. Answer with the digit only."""

_RATING = re.compile(r"[1-5]")


def _results_text(results: list[Any]) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False, default=str) for r in results)


def _question(messages: list[dict]) -> str:
    users = [m.get("content") for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return users[0] if users else ""


@register("openai")
def openai_judge(obs: Observed, gt: GroundTruth | None, s: WorkerSettings, messages: list[dict]) -> Verdict:
    """Five-level rating from an OpenAI-compatible chat endpoint; transient failures retried with jittered
    backoff, then raised as `TransientJudgeError` (Celery retries the task later)."""
    import openai

    if not s.judge_url:
        raise ValueError("workers.judge = 'openai' needs workers.judge_url")
    client = openai.OpenAI(
        base_url=s.judge_url,
        api_key=os.environ.get(s.judge_api_key_env) or "none",
        timeout=s.judge_timeout_s,
        max_retries=0,
    )
    prompt = JUDGE_PROMPT.format(
        question=_question(messages)[:4000], results=_results_text(obs.tool_results)[:4000], reply=obs.reply[:4000]
    )
    transient = (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError, openai.InternalServerError)
    for attempt in range(s.judge_retries + 1):
        try:
            out = client.chat.completions.create(
                model=s.judge_model, temperature=0.0, max_tokens=4, messages=[{"role": "user", "content": prompt}]
            )
            break
        except transient as exc:
            if attempt == s.judge_retries:
                raise TransientJudgeError(f"judge at {s.judge_url} unavailable: {exc}") from None
            time.sleep(random.uniform(0, min(8.0, 0.5 * 2**attempt)))  # full jitter
    text = (out.choices[0].message.content or "") if out.choices else ""
    found = _RATING.search(text)
    if not found:
        return Verdict(0.0, {"judge_rating": 0.0, "judge_unparsed": 1.0})
    rating = int(found.group())
    return Verdict(LEVELS[rating - 1], {"judge_rating": float(rating), "judge_unparsed": 0.0})
