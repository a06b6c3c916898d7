"""One eval item, one request to a running slca server, one `ItemRecord`.

- A task: `POST /v1/agent/runs` (serve's own agent loop, tools answered by the simulator), not recorded, its
  trajectory returned and scored by the workers' scorer (`workers.scoring.score_trajectory`): the headline
  `success` is the scorer's, so eval, the probe and the training reward agree on what a solved task is.
- A BFCL case: `POST /v1/chat/completions` with the case's tools (tool_choice auto), then BFCL's ast_checker.
  The chat response lists only the calls that parsed; a malformed `<tool_call>` block next to a valid one leaves
  no trace in it. The request therefore asks for `logprobs`, whose per-token texts spell the turn as sampled, and
  any block that does not parse into a call of an offered tool fails the item (`ops.experiments.eval.bfcl.verdict`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import aiohttp

from ops.experiments.eval.bfcl import verdict
from ops.experiments.eval.records import EvalItem, EvalPlan, ItemRecord
from slca.chat.hermes import function_of, parse_tool_calls
from slca.contracts import Trajectory


def sampling(item: EvalItem, plan: EvalPlan) -> dict[str, Any]:
    """Greedy (temperature 0, seed 0), or temperature 1 with the item's own seed: a sampled run is reproducible."""
    if plan.mode == "greedy":
        return {"temperature": 0.0, "seed": 0}
    return {"temperature": 1.0, "seed": item.seed}


def task_request(item: EvalItem, plan: EvalPlan) -> dict[str, Any]:
    """One rollout, not recorded (a held-out task is never training data), its trajectory returned; the gold
    calls travel with it so the trajectory carries what it is scored against."""
    task = item.task
    return {
        "task_id": task.task_id,
        "messages": task.messages,
        "tools": task.tools,
        "n": 1,
        "max_tokens": plan.max_tokens,
        "max_turns": plan.max_turns,
        "record": False,
        "return_trajectories": True,
        "ground_truth": task.ground_truth.model_dump(mode="json"),
        **sampling(item, plan),
    }


def bfcl_request(item: EvalItem, plan: EvalPlan) -> dict[str, Any]:
    return {
        "messages": item.case.messages,
        "tools": item.case.tools,
        "tool_choice": "auto",
        "max_tokens": plan.max_tokens,
        "logprobs": True,
        **sampling(item, plan),
    }


async def _post(
    http: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """(response body, None) on a 200, else (None, why)."""
    try:
        async with http.post(url, json=body) as r:
            payload = await r.json(content_type=None)
            status = r.status
    except (aiohttp.ClientError, json.JSONDecodeError) as exc:
        return None, f"request failed: {type(exc).__name__}: {exc}"
    if status != 200:
        message = payload.get("error", {}).get("message") if isinstance(payload, dict) else payload
        return None, f"HTTP {status}: {message}"
    return payload, None


def _failed(item: EvalItem, error: str) -> ItemRecord:
    return ItemRecord(item.suite, item.item_id, success=False, exec=None, pref=None, error=error)


@lru_cache(maxsize=1)
def _scoring_settings():
    from workers.settings import WorkerSettings

    return WorkerSettings()


async def run_task_item(http: aiohttp.ClientSession, base_url: str, item: EvalItem, plan: EvalPlan) -> ItemRecord:
    from workers.scoring import ScoringError, score_trajectory

    payload, error = await _post(http, f"{base_url}/v1/agent/runs", task_request(item, plan))
    if error:
        return _failed(item, error)
    run = payload["runs"][0]
    # scored against the task's own gold calls, whatever the server echoed back
    traj = Trajectory.model_validate(run["trajectory"]).model_copy(update={"ground_truth": item.task.ground_truth})
    try:
        reward = score_trajectory(traj, _scoring_settings())
    except ScoringError as exc:
        return _failed(item, f"scoring failed: {exc}")
    components = dict(reward.components)
    success = components["success"] >= 0.5 if "success" in components else reward.exec >= 1.0
    calls = [{"turn": c.turn, "name": c.name, "arguments": c.arguments, "valid": c.valid} for c in traj.tool_calls]
    return ItemRecord(
        item.suite,
        item.item_id,
        success=bool(success),
        exec=reward.exec,
        pref=reward.pref,
        components=components,
        calls=calls,
        reply=_text(run.get("message")),
        policy_version=run.get("policy_version"),
    )


def _text(message: dict[str, Any] | None) -> str:
    content = (message or {}).get("content")
    return content if isinstance(content, str) else ""


def sampled_text(choice: dict[str, Any]) -> str:
    """The turn as sampled: its tokens' texts (the `logprobs` content), else the message content (a server that
    gives no logprobs; a malformed block beside a valid call is then invisible)."""
    tokens = ((choice.get("logprobs") or {}).get("content")) or []
    if tokens:
        return "".join(t.get("token", "") for t in tokens)
    return _text(choice.get("message"))


async def run_bfcl_item(http: aiohttp.ClientSession, base_url: str, item: EvalItem, plan: EvalPlan) -> ItemRecord:
    payload, error = await _post(http, f"{base_url}/v1/chat/completions", bfcl_request(item, plan))
    if error:
        return _failed(item, error)
    choice = payload["choices"][0]
    message = choice.get("message") or {}
    offered = {function_of(f).get("name") for f in item.case.functions}
    written = parse_tool_calls(sampled_text(choice), offered)
    # the values of the calls that parsed come from the message (exact text; a token's text may split a character)
    parsed = [_call(c) for c in message.get("tool_calls") or []]
    malformed = [
        {"name": c.name, "arguments": c.arguments, "valid": False, "error": c.error} for c in written if not c.valid
    ]
    result = verdict(item.case, [(c["name"], c["arguments"]) for c in parsed], [c["error"] for c in malformed])
    return ItemRecord(
        item.suite,
        item.item_id,
        success=bool(result["valid"]),
        exec=None,
        pref=None,
        components={"calls": float(len(parsed)), "malformed": float(len(malformed))},
        calls=[{**c, "valid": True} for c in parsed] + malformed,
        reply=_text(message),
        policy_version=payload.get("policy_version"),
        detail=None if result["valid"] else "; ".join(map(str, result.get("error") or [])) or None,
    )


def _call(tool_call: dict[str, Any]) -> dict[str, Any]:
    fn = tool_call.get("function") or {}
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            pass
    return {"name": fn.get("name"), "arguments": args}
