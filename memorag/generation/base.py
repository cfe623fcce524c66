"""The generator interface shared by local models and HTTP endpoints."""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass


class GeneratorError(RuntimeError):
    """A generator that cannot be reached, refuses the request, or breaks off."""


@dataclass(frozen=True)
class PromptTokens:
    """A prompt (with its system prompt) measured once, as the generator will read it.

    `count` is the tokens the model reads (exact for a local model, chat template included;
    an estimate for an endpoint). `ids` are those tokens for a local model, handed back to
    `Generator.generate_measured` so that what was measured is what runs (None for an
    endpoint: it is sent `prompt` itself). `token_starts` and `token_ends` are the character
    span of each token of the prompt in `prompt`, sorted (None when the tokenizer gives no
    offsets); the tokens of a chat template around the prompt fall outside it.
    """

    prompt: str
    system: str | None
    count: int
    ids: tuple[int, ...] | None = None
    token_starts: tuple[int, ...] | None = None
    token_ends: tuple[int, ...] | None = None

    def tokens_within(self, start: int, end: int) -> int | None:
        """Tokens that overlap characters `start`..`end`-1 of `prompt`; None without offsets."""
        if self.token_starts is None or self.token_ends is None:
            return None
        if end <= start:
            return 0
        first = bisect.bisect_right(self.token_ends, start)  # the first token ending after `start`
        stop = bisect.bisect_left(self.token_starts, end)  # past the last token starting before `end`
        return max(0, stop - first)


class Generator(ABC):
    """Writes a reply to one user prompt (plus an optional system prompt).

    `context_window` is the number of tokens the model reads (prompt plus reply), or
    None when unknown; the pipeline fits retrieved evidence inside it.
    """

    name: str = "generator"
    context_window: int | None = None
    serves_concurrently: bool = False  # whether requests sent at once are answered in parallel (a server)

    @abstractmethod
    def generate(
        self,
        prompt: str,
        *,
        system: str | None = None,
        max_new_tokens: int = 256,
        on_text: Callable[[str], None] | None = None,
    ) -> str:
        """The reply; with `on_text`, each new piece of it is passed on as it is written."""

    def generate_with_prefix(
        self,
        prefix: str,
        rest: str,
        *,
        system: str | None = None,
        max_new_tokens: int = 256,
        on_text: Callable[[str], None] | None = None,
    ) -> str:
        """The reply to the prompt `prefix + rest`, where many prompts share `prefix` (a corpus).

        Here the whole prompt is sent each time: an endpoint server (vLLM, llama.cpp, ...)
        caches shared prompt prefixes itself. `LocalGenerator` keeps the prefix's
        key/value cache and runs only the rest.
        """
        return self.generate(prefix + rest, system=system, max_new_tokens=max_new_tokens, on_text=on_text)

    def generate_batch(self, prompts: Sequence[str], *, system: str | None = None,
                       max_new_tokens: int = 256) -> list[str]:
        """The reply to each prompt, as `generate` writes it: sent at once to an endpoint that answers
        requests concurrently (`serves_concurrently`), else one after another. `LocalGenerator` decodes
        them as one batch."""
        ask = lambda prompt: self.generate(prompt, system=system, max_new_tokens=max_new_tokens)  # noqa: E731
        if not self.serves_concurrently or len(prompts) < 2:
            return [ask(prompt) for prompt in prompts]
        with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
            return list(pool.map(ask, prompts))

    @abstractmethod
    def count_tokens(self, prompt: str, system: str | None = None) -> int:
        """Tokens the model reads for this prompt (exact for local models, estimated otherwise)."""

    def measure(self, prompt: str, system: str | None = None) -> PromptTokens:
        """`prompt` and `system` as the model will read them: counted (`count_tokens`); a local
        model adds the token ids and their offsets."""
        return PromptTokens(prompt, system, self.count_tokens(prompt, system))

    def tokens_within(self, measured: PromptTokens, start: int, end: int) -> int:
        """Tokens of characters `start`..`end`-1 of a measured prompt: from its token offsets, or,
        without them, the count of that piece of text alone (an estimate)."""
        counted = measured.tokens_within(start, end)
        if counted is not None:
            return counted
        return max(0, self.count_tokens(measured.prompt[start:end]) - self.count_tokens(""))

    def generate_measured(
        self,
        measured: PromptTokens,
        *,
        max_new_tokens: int = 256,
        on_text: Callable[[str], None] | None = None,
    ) -> str:
        """The reply to a prompt `measure` gave: a local model reads its token ids; here (an
        endpoint) its text is sent, the same text that was measured."""
        return self.generate(measured.prompt, system=measured.system, max_new_tokens=max_new_tokens, on_text=on_text)

    @property
    def memory_writer(self) -> Generator:
        """The generator that writes text a pipeline reads as memory (the memorag-lite mode's gists and its
        clues): this one, except for a reader, whose adapter writes answers only and whose base writes the
        memory (`LocalGenerator`'s `memory_writer`)."""
        return self

    def check(self) -> None:  # noqa: B027 - optional hook; local generators have nothing to check
        """Raise `GeneratorError` now if the generator cannot work (e.g. an unreachable endpoint)."""

    def describe(self) -> dict:
        return {"name": self.name, "kind": type(self).__name__, "context_window": self.context_window}


class WrappedGenerator(Generator, ABC):
    """A generator that stands in front of `inner`: its name and context window are `inner`'s (setting
    the window sets `inner`'s); subclasses say what each call does."""

    def __init__(self, inner: Generator):
        self.inner = inner

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def context_window(self) -> int | None:  # type: ignore[override]
        return self.inner.context_window

    @context_window.setter
    def context_window(self, value: int | None) -> None:
        self.inner.context_window = value
