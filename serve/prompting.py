"""Prompt formatting: the model's chat template, with tools in the Hermes convention where the template has none.

OpenAI messages are first turned into plain template messages (`to_template_messages`): the tool schemas go
into the system message (`<tools>`), assistant `tool_calls` become `<tool_call>` blocks, `tool` messages
become `<tool_response>` blocks. Prompts are tokenized message by message (`prompt_chunks`), so that every
token of the environment side is attributed to the message that produced it.
"""

from __future__ import annotations

from slca.chat.messages import to_template_messages  # noqa: F401  (re-exported for serve modules)
from slca.contracts import SegmentKind

ROLE_KINDS = {
    "system": SegmentKind.SYSTEM,
    "developer": SegmentKind.SYSTEM,
    "user": SegmentKind.USER,
    "tool": SegmentKind.TOOL_RESULT,
    # An assistant turn given in the request was not sampled by this policy: it is context, like user text.
    "assistant": SegmentKind.USER,
}


def render(tokenizer, messages: list[dict[str, str]], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def prompt_chunks(tokenizer, messages: list[dict[str, str]]) -> list[tuple[list[int], SegmentKind]]:
    """Token ids of the prompt (with the generation prompt), one chunk per message, with its segment kind.

    Each chunk is the text the template adds for that message; the generation prompt joins the last chunk.
    The template may add text of its own (SmolLM2 adds a default system message): that counts as system.
    """
    chunks: list[tuple[list[int], SegmentKind]] = []
    previous = ""
    for k in range(1, len(messages) + 1):
        last = k == len(messages)
        text = render(tokenizer, messages[:k], generation_prompt=last)
        if not text.startswith(previous):
            raise ValueError("chat template is not prefix-stable; cannot attribute prompt tokens to messages")
        piece = text[len(previous) :]
        kind = ROLE_KINDS.get(messages[k - 1]["role"], SegmentKind.USER)
        default_system = k == 1 and kind != SegmentKind.SYSTEM and "<|im_start|>system" in piece
        if default_system:  # split the template's own system text from the first message
            cut = piece.index("<|im_start|>" + messages[0]["role"])
            chunks.append((encode(tokenizer, piece[:cut]), SegmentKind.SYSTEM))
            piece = piece[cut:]
        chunks.append((encode(tokenizer, piece), kind))
        previous = text
    return [(ids, kind) for ids, kind in chunks if ids]


def continuation_ids(
    tokenizer, history: list[dict[str, str]], new_messages: list[dict[str, str]], turn_closed: bool
) -> list[int]:
    """Environment tokens after a generated assistant turn: the rest of the template up to the next
    generation prompt. `history` ends with that assistant turn; `turn_closed` says whether the sampled tokens
    already include the end-of-turn token (otherwise the template's own end-of-turn is added here)."""
    eos = tokenizer.eos_token
    base = render(tokenizer, history, generation_prompt=False)
    full = render(tokenizer, history + new_messages, generation_prompt=True)
    end = base.rindex(eos) + (len(eos) if turn_closed else 0)
    if not full.startswith(base[:end]):
        raise ValueError("chat template is not prefix-stable across turns")
    return encode(tokenizer, full[end:])
