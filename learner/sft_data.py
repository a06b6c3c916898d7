"""Warm-start data: task-pack demonstrations rendered in the Hermes format, with assistant-only labels.

Conversation = system (`<tools>` schemas, `slca.chat.hermes.render_tools_system`) → user → assistant
`<tool_call>` blocks → tool `<tool_response>` → … → final assistant answer. Labels are the token ids on
assistant content (and its end-of-turn token), -100 elsewhere: the model never learns to write tool results.
The caller hands the demonstrations in (`ops.experiments.warmstart.data` loads them from the sim's task packs): the
learner imports no other component."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slca.chat.messages import to_template_messages
from slca.contracts import Task

IGNORE = -100


@dataclass
class Example:
    input_ids: list[int]
    labels: list[int]


def template_messages(task: Task, demo: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The demonstration as the API prompts a conversation (`slca.chat.messages.to_template_messages`)."""
    return to_template_messages(demo, task.tools)


def encode_conversation(tokenizer, messages: list[dict[str, str]], max_tokens: int) -> Example | None:
    """Token ids of the rendered chat and labels on assistant spans; None when longer than `max_tokens`."""
    spans, previous = [], ""
    header = "<|im_start|>assistant\n"
    eos = tokenizer.eos_token or "<|im_end|>"
    for k in range(1, len(messages) + 1):
        text = tokenizer.apply_chat_template(messages[:k], tokenize=False)
        if messages[k - 1]["role"] == "assistant":
            start = text.index(header, len(previous)) + len(header)
            spans.append((start, text.index(eos, start) + len(eos)))
        previous = text
    enc = tokenizer(previous, add_special_tokens=False, return_offsets_mapping=True)
    ids = enc["input_ids"]
    if len(ids) > max_tokens:
        return None
    labels = [
        tok if any(a < e and b > s for s, e in spans) else IGNORE for tok, (a, b) in zip(ids, enc["offset_mapping"])
    ]
    return Example(ids, labels)


Demonstration = tuple[Task, list[dict[str, Any]]]
"""A task and its gold conversation as OpenAI messages (user → assistant calls → tool results → answer)."""


def build_examples(tokenizer, demos: list[Demonstration], max_tokens: int) -> list[Example]:
    out = []
    for task, demo in demos:
        ex = encode_conversation(tokenizer, template_messages(task, demo), max_tokens)
        if ex is not None:
            out.append(ex)
    return out
