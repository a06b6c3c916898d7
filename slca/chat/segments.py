"""Segment tags for sampled tokens, computed by incremental decode of the token ids (docs/design.md#segments).

Each generated token is decoded as the text it adds; a character map marks `<think>…</think>` as reasoning
and `<tool_call>…</tool_call>` (delimiters included) as tool_call; everything else is summary. A token
takes the kind of its first non-whitespace character (so "\n<" opening a block is tool_call); an
all-whitespace token and the end-of-turn token take the kind of the token before them: the end-of-turn
token belongs to the segment it closes.

One segmenter for every component: serve tags its trajectories with it, and the learner's in-process rollouts
(`learner/rollout_local.py`: test helpers, the TRL bench) with the same rules.
"""

from __future__ import annotations

import re

from slca.contracts import SegmentKind

_SPANS = (
    (re.compile(r"<think>.*?(?:</think>|$)", re.S), SegmentKind.REASONING),
    (re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.S), SegmentKind.TOOL_CALL),
)


def token_texts(tokenizer, token_ids: list[int], window: int = 8) -> list[str]:
    """Text added by each token, by incremental decode over a short window of preceding tokens (as vLLM's
    detokenizer does): O(n) rather than re-decoding the whole prefix. A token that ends inside an incomplete
    UTF-8 sequence adds "" and the character is attributed to the token that completes it."""
    texts: list[str] = []
    pending = 0  # tokens whose bytes have not produced a complete character yet
    for i in range(len(token_ids)):
        start = max(0, i - pending - window)
        before = tokenizer.decode(token_ids[start : i - pending], skip_special_tokens=False)
        after = tokenizer.decode(token_ids[start : i + 1], skip_special_tokens=False)
        if after.endswith("\ufffd"):
            texts.append("")
            pending += 1
            continue
        texts.append(after[len(before) :] if after.startswith(before) else after)
        pending = 0
    return texts


def char_kinds(text: str) -> list[SegmentKind]:
    kinds = [SegmentKind.SUMMARY] * len(text)
    for pattern, kind in _SPANS:
        for match in pattern.finditer(text):
            if kind == SegmentKind.TOOL_CALL and kinds[match.start()] == SegmentKind.REASONING:
                continue  # a call written inside reasoning is reasoning
            kinds[match.start() : match.end()] = [kind] * (match.end() - match.start())
    return kinds


def generated_kinds(tokenizer, token_ids: list[int], end_ids: set[int]) -> list[SegmentKind]:
    """One segment kind per sampled token (`end_ids`: the end-of-turn tokens)."""
    texts = token_texts(tokenizer, token_ids)
    kinds_of_chars = char_kinds("".join(texts))
    out: list[SegmentKind] = []
    offset = 0
    for token, text in zip(token_ids, texts):
        previous = out[-1] if out else SegmentKind.SUMMARY
        lead = len(text) - len(text.lstrip())
        if token in end_ids or lead == len(text):
            out.append(previous)
        else:
            out.append(kinds_of_chars[offset + lead])
        offset += len(text)
    return out


def spans_of(kinds: list[SegmentKind]) -> list[tuple[int, int, SegmentKind]]:
    """Runs of equal kinds as half-open spans `(start, end, kind)` over the token positions."""
    spans, start = [], 0
    for k in range(1, len(kinds) + 1):
        if k == len(kinds) or kinds[k] != kinds[start]:
            spans.append((start, k, kinds[start]))
            start = k
    return spans
