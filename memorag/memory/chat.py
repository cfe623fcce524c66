"""How a context and a prompt are laid out around the chat template.

MemoRAG puts the long context inside the user turn and the instruction after it.
To memorize the context once and ask many prompts, the rendered template is split
into: prefix (template start), the context, a joiner, the prompt, and a suffix (end
of the user turn plus the assistant's opening). A model without a chat template
reads the raw context and the prompt after a blank line.
"""

from __future__ import annotations

from dataclasses import dataclass

_CONTEXT = "\u2063MEMORAG_CONTEXT\u2063"
_PROMPT = "\u2063MEMORAG_PROMPT\u2063"


@dataclass(frozen=True)
class PromptLayout:
    prefix: str = ""
    joiner: str = "\n\n"
    suffix: str = "\n"
    chat: bool = False

    @classmethod
    def for_tokenizer(cls, tokenizer, system: str | None = None) -> PromptLayout:
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            return cls()
        messages = [{"role": "user", "content": f"{_CONTEXT}\n\n{_PROMPT}"}]
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        c, p = rendered.index(_CONTEXT), rendered.index(_PROMPT)
        return cls(
            prefix=rendered[:c],
            joiner=rendered[c + len(_CONTEXT) : p],
            suffix=rendered[p + len(_PROMPT) :],
            chat=True,
        )

    def context(self, text: str) -> str:
        """The text memorized for a context."""
        return self.prefix + text

    def continuation(self, prompt: str) -> str:
        """The text that follows a memorized context."""
        return self.joiner + prompt + self.suffix

    def standalone(self, prompt: str) -> str:
        """A prompt with no memory before it."""
        return self.prefix + prompt + self.suffix
