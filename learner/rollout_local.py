"""Sampling rollouts in-process with an HF model: real token-by-token sampling with the model's own logprobs.

Used by tests and as a fallback generator. Optionally *constrained* to a set of candidate continuations
(a token trie): each step samples only among tokens that continue some candidate, renormalised; the
behaviour logprob recorded is the model's unconstrained log π(token) at temperature 1, the quantity the
learner recomputes — so the ratio is 1 on-policy and the gradient raises the probability of what was chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from slca.chat.hermes import parse_tool_calls, function_of
from slca.chat.messages import prompt_ids  # noqa: F401 — the API's prompt renderer, re-exported for callers
from slca.chat.segments import generated_kinds, spans_of
from slca.contracts import Segment, SegmentKind, ToolCallRecord, Trajectory


@dataclass
class Sample:
    ids: list[int]
    logprobs: list[float]


class _Row:
    """Sampling state of one member: its ids, logprobs, and where its constrained part ended."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.candidate_done: int | None = None
        self.done = False


def _allowed(row: _Row, candidates: list[list[int]] | None, free_tail: int) -> set[int] | None:
    """Tokens row may sample next (None: any); marks the row done when its budget is spent."""
    if candidates is None:
        return None
    if row.candidate_done is None and (row.ids in candidates or len(row.ids) >= max(map(len, candidates))):
        row.candidate_done = len(row.ids)
    if row.candidate_done is not None:
        if len(row.ids) >= row.candidate_done + free_tail:
            row.done = True
        return None
    n = len(row.ids)
    return {c[n] for c in candidates if len(c) > n and c[:n] == row.ids}


@torch.no_grad()
def sample_group(
    model,
    prompt: list[int],
    n: int,
    max_new: int,
    eos_id: int,
    generator: torch.Generator,
    temperature: float = 1.0,
    candidates: list[list[int]] | None = None,
    free_tail: int = 0,
) -> list[Sample]:
    """n completions of one prompt, sampled together: the prompt is run once and its KV cache shared.

    With `candidates`, each member's constraint ends when it completes a candidate; then `free_tail` more
    tokens are sampled without constraint. Behaviour logprobs are unconstrained log π at temperature 1."""
    device = next(model.parameters()).device
    out = model(torch.tensor([prompt], device=device), use_cache=True)
    past = out.past_key_values
    past.batch_repeat_interleave(n)
    logits = out.logits[:, -1].float().expand(n, -1)
    rows = [_Row() for _ in range(n)]
    for _ in range(max_new):
        logp = torch.log_softmax(logits, -1)
        scores = logits / max(temperature, 1e-6)
        next_ids = []
        for r, row in enumerate(rows):
            allowed = _allowed(row, candidates, free_tail) if not row.done else None
            if row.done:
                next_ids.append(eos_id)
                continue
            sc = scores[r]
            if allowed is not None:
                mask = torch.full_like(sc, float("-inf"))
                mask[list(allowed)] = 0.0
                sc = sc + mask
            token = int(torch.multinomial(torch.softmax(sc, -1).cpu(), 1, generator=generator))
            row.ids.append(token)
            row.logprobs.append(min(float(logp[r, token]), 0.0))
            row.done = token == eos_id
            next_ids.append(token)
        for row in rows:  # a row that just completed its free tail stops before the next forward
            if not row.done and candidates is not None:
                _allowed(row, candidates, free_tail)
        if all(row.done for row in rows):
            break
        out = model(torch.tensor(next_ids, device=device)[:, None], past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[:, -1].float()
    return [Sample(row.ids, row.logprobs) for row in rows]


def segment_generated(tokenizer, ids: list[int]) -> list[tuple[int, int, SegmentKind]]:
    """Spans over the sampled `ids`, tagged as serve tags them (`slca.chat.segments`, docs/design.md#segments):
    `<think>…</think>` is reasoning, `<tool_call>…</tool_call>` tool_call, the rest summary; a special token
    (end of turn) belongs to the segment it closes."""
    return spans_of(generated_kinds(tokenizer, ids, set(tokenizer.all_special_ids)))


def build_trajectory(
    tokenizer, task_id: str, prompt: list[int], s: Sample, tools, version: int, messages=None, ground_truth=None
) -> Trajectory:
    segments = [Segment(start=0, end=len(prompt), kind=SegmentKind.SYSTEM)]
    for a, b, kind in segment_generated(tokenizer, s.ids):
        segments.append(Segment(start=len(prompt) + a, end=len(prompt) + b, kind=kind, turn=0))
    text = tokenizer.decode(s.ids, skip_special_tokens=True)
    offered = {function_of(t).get("name") for t in tools}
    calls = [
        ToolCallRecord(
            turn=0, block=c.block, name=c.name, arguments=c.arguments, valid=c.valid, raw=c.raw, error=c.error
        )
        for c in parse_tool_calls(text, offered)
    ]
    return Trajectory(
        task_id=task_id,
        policy_version=version,
        tools=tools,
        messages=[*(messages or []), {"role": "assistant", "content": text}],  # the reply the scorers read
        tokens=prompt + s.ids,
        logprobs=[None] * len(prompt) + s.logprobs,
        segments=segments,
        tool_calls=calls,
        ground_truth=ground_truth,
        meta={"engine": "learner.rollout_local", "text": text},
    )
