"""Streaming text of a growing token sequence in linear time: each step decodes a short window (vLLM's prefix and
read offsets), never the whole output again, and a stop string is searched for only in the new text."""

from __future__ import annotations

from typing import Iterable


class IncrementalText:
    """Text of the tokens added so far (those in `skip`, the end-of-turn ids, left out), cut at the first of
    `stop`. `add` returns the text that may be sent now: up to `hold` characters stay back while a stop string
    might still be completing, as does a character whose UTF-8 bytes are not all sampled yet."""

    def __init__(self, tokenizer, skip: Iterable[int], stop: list[str]):
        self.tokenizer = tokenizer
        self.skip = frozenset(skip)
        self.stop = [s for s in stop if s]
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.ids: list[int] = []
        self.prefix = 0  # ids[prefix:read] decode to the text's tail already accounted for
        self.read = 0
        self.text = ""
        self.sent = 0
        self.cut: int | None = None  # where the first stop string starts
        self._searched = 0  # the text before this offset holds no stop string

    def add(self, token_ids: list[int], final: bool = False) -> str:
        """The sendable text the new tokens make (all that is left when `final`)."""
        self.ids += [t for t in token_ids if t not in self.skip]
        if self.cut is None:
            self._decode(final)
            self._find_stop()
        end = self.cut if self.cut is not None else len(self.text)
        upto = end if final or self.cut is not None else max(self.sent, end - self.hold)
        if upto <= self.sent:
            return ""
        out, self.sent = self.text[self.sent : upto], upto
        return out

    def _decode(self, final: bool) -> None:
        decode = self.tokenizer.decode
        before = decode(self.ids[self.prefix : self.read], skip_special_tokens=False)
        after = decode(self.ids[self.prefix :], skip_special_tokens=False)
        if len(after) > len(before) and (final or not after.endswith("\ufffd")):
            self.text += after[len(before) :]
            self.prefix, self.read = self.read, len(self.ids)  # the last chunk stays as context

    def _find_stop(self) -> None:
        if not self.stop:
            return
        hits = [i for s in self.stop if (i := self.text.find(s, max(0, self._searched - len(s) + 1))) >= 0]
        if hits:
            self.cut = min(hits)
        self._searched = len(self.text)
