"""Token ids in, text pieces out: incremental decoding for streamed answers."""

from __future__ import annotations

from collections.abc import Callable, Iterable


class TextStream:
    """Decode a growing list of token ids and hand each new piece of text to `on_text`.

    The whole sequence is decoded on every push (answers are short), so pieces join up
    exactly as one final decode would, including spaces that depend on the previous
    token. A piece ending in U+FFFD (half of a multi-byte character) is held back
    until the character completes.
    """

    def __init__(self, tokenizer, on_text: Callable[[str], None] | None = None, skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.on_text = on_text
        self.skip_special_tokens = skip_special_tokens
        self.ids: list[int] = []
        self.emitted = ""

    def push(self, token_ids: Iterable[int]) -> None:
        self.ids.extend(int(token) for token in token_ids)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=self.skip_special_tokens)
        if text.endswith("\ufffd"):
            return
        self._emit(text)

    def finish(self) -> str:
        """Flush what is left and return the whole text."""
        text = self.tokenizer.decode(self.ids, skip_special_tokens=self.skip_special_tokens)
        self._emit(text)
        return text

    def _emit(self, text: str) -> None:
        if text.startswith(self.emitted):
            piece = text[len(self.emitted) :]
        else:  # decoding changed earlier text (rare); send only what is new at the end
            common = 0
            while common < min(len(text), len(self.emitted)) and text[common] == self.emitted[common]:
                common += 1
            piece = text[max(common, len(self.emitted)) :]
        if piece and self.on_text is not None:
            self.on_text(piece)
        if len(text) >= len(self.emitted):
            self.emitted = text
