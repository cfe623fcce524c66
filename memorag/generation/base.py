"""The generator interface shared by local models and HTTP endpoints."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable


class GeneratorError(RuntimeError):
    """A generator that cannot be reached, refuses the request, or breaks off."""


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

    @abstractmethod
    def count_tokens(self, prompt: str, system: str | None = None) -> int:
        """Tokens the model reads for this prompt (exact for local models, estimated otherwise)."""

    def check(self) -> None:  # noqa: B027 - optional hook; local generators have nothing to check
        """Raise `GeneratorError` now if the generator cannot work (e.g. an unreachable endpoint)."""

    def describe(self) -> dict:
        return {"name": self.name, "kind": type(self).__name__, "context_window": self.context_window}
