"""Prompt formatting: the model's chat template, with tools in the Hermes convention where the template has none.

OpenAI messages are first turned into plain template messages (`to_template_messages`): the tool schemas go
into the system message (`<tools>`), assistant `tool_calls` become `<tool_call>` blocks, `tool` messages
become `<tool_response>` blocks. Prompts are tokenized message by message (`prompt_chunks`), so that every
token of the environment side is attributed to the message that produced it.
"""

from __future__ import annotations

from typing import Any

from jinja2 import TemplateError

from serve.errors import BadRequest
from slca.chat.messages import to_template_messages
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


def request_chunks(tokenizer, messages: list[dict[str, Any]], tools: list[Any] | None):
    """`prompt_chunks` of an API request's messages; a conversation the chat template refuses (a template may
    raise on role order) or cannot attribute turn by turn is the caller's 400."""
    try:
        return prompt_chunks(tokenizer, to_template_messages(messages, tools))
    except (TemplateError, ValueError) as exc:
        raise BadRequest(
            f"messages: the chat template cannot render this conversation: {exc}"[:500], param="messages"
        ) from None


def prompt_chunks(tokenizer, messages: list[dict[str, str]]) -> list[tuple[list[int], SegmentKind]]:
    """Token ids of the prompt (with the generation prompt), one chunk per message, with its segment kind.

    Each chunk is the text the template adds for that message; the generation prompt joins the last chunk.
    The template may add text of its own (SmolLM2 adds a default system message): that counts as system.
    """
    chunks: list[tuple[list[int], SegmentKind]] = []
    for k, piece in enumerate(message_texts(tokenizer, messages)):
        kind = ROLE_KINDS.get(messages[k]["role"], SegmentKind.USER)
        default_system = k == 0 and kind != SegmentKind.SYSTEM and "<|im_start|>system" in piece
        if default_system:  # split the template's own system text from the first message
            cut = piece.index("<|im_start|>" + messages[0]["role"])
            chunks.append((encode(tokenizer, piece[:cut]), SegmentKind.SYSTEM))
            piece = piece[cut:]
        chunks.append((encode(tokenizer, piece), kind))
    return [(ids, kind) for ids, kind in chunks if ids]


def message_texts(tokenizer, messages: list[dict[str, str]]) -> list[str]:
    """The text the template adds for each message (`render(messages[:k+1]) - render(messages[:k])`), the
    generation prompt joined to the last one — in time linear in the conversation.

    Rendering every prefix is quadratic (5,000 short messages took 28 s). Instead message k's text is taken
    from a render of it after its predecessor alone: `render(m[k-1:k+1]) - render(m[k-1:k])`. That is exact for
    templates whose text for a message depends on nothing older than the message before (ChatML, SmolLM2,
    Qwen); one render of the whole conversation checks it, and any other template falls back to prefixes.
    """
    n = len(messages)
    pieces = [render(tokenizer, messages[:1], generation_prompt=n == 1)]
    for k in range(1, n):
        alone = render(tokenizer, messages[k - 1 : k], generation_prompt=False)
        pair = render(tokenizer, messages[k - 1 : k + 1], generation_prompt=k == n - 1)
        if not pair.startswith(alone):
            return _prefix_texts(tokenizer, messages)
        pieces.append(pair[len(alone) :])
    if "".join(pieces) == render(tokenizer, messages, generation_prompt=True):
        return pieces
    return _prefix_texts(tokenizer, messages)


def _prefix_texts(tokenizer, messages: list[dict[str, str]]) -> list[str]:
    """The reference: every prefix rendered (quadratic; only for templates that look further back)."""
    pieces, previous = [], ""
    for k in range(1, len(messages) + 1):
        text = render(tokenizer, messages[:k], generation_prompt=k == len(messages))
        if not text.startswith(previous):
            raise ValueError("chat template is not prefix-stable; cannot attribute prompt tokens to messages")
        pieces.append(text[len(previous) :])
        previous = text
    return pieces


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
