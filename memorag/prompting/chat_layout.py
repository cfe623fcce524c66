"""How a context and a prompt are laid out around the chat template (the memory model's, the
clue-SFT data's and the full-context mode's one layout).

MemoRAG puts the long context inside the user turn and the instruction after it.
To memorize the context once and ask many prompts, the rendered template is split
into: prefix (template start), the context, a joiner, the prompt, and a suffix (end
of the user turn plus the assistant's opening). A model without a chat template
reads the raw context and the prompt after a blank line. `context_ids` and `prompt_ids`
turn text into the ids the memory model reads, laid out so. Nothing here reads a tensor.
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


def encode(tokenizer, layout: PromptLayout, text: str, first: bool) -> list[int]:
    """Token ids of `text`; special tokens (bos) only at the start of a stream read without a chat template."""
    if tokenizer is None:
        raise ValueError("this MemoryModel has no tokenizer; pass token ids instead of text")
    return tokenizer(text, add_special_tokens=first and not layout.chat)["input_ids"]


def context_ids(tokenizer, layout: PromptLayout, context, continued_chat: bool | None) -> tuple[list[int], bool]:
    """The ids a context (text or ids) is memorized as, and whether the memory is laid out in the chat
    template. `continued_chat`: None when the context starts a memory (text then opens a user turn), else
    whether the memory it continues is laid out in the chat template."""
    if not isinstance(context, str):
        return [int(i) for i in context], bool(continued_chat)
    if not context.strip():
        raise ValueError("the context is empty; give a text with some content")
    if continued_chat is None:
        return encode(tokenizer, layout, layout.context(context), first=True), layout.chat
    return encode(tokenizer, layout, context, first=False), continued_chat


def prompt_ids(tokenizer, layout: PromptLayout, prompt, continued_chat: bool | None) -> list[int]:
    """The ids of a prompt (text or ids): alone in a user turn (`continued_chat` None), or continuing a
    memory laid out in the chat template (True) or without it (False)."""
    if not isinstance(prompt, str):
        return [int(i) for i in prompt]
    if not prompt.strip():
        raise ValueError("the prompt is empty; ask something")
    if continued_chat is None:
        return encode(tokenizer, layout, layout.standalone(prompt), first=True)
    return continuation_ids(tokenizer, layout, prompt, continued_chat)


def continuation_ids(tokenizer, layout: PromptLayout, prompt: str, chat: bool) -> list[int]:
    """The ids of a prompt text that follows a context read in the chat template (`chat`) or without it."""
    return encode(tokenizer, layout, layout.continuation(prompt) if chat else prompt, first=False)

