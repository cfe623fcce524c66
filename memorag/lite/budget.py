"""How many tokens each gist may take, so that the memory, a prompt and its reply fit the generator."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memorag.lite.memory import GistMemory
from memorag.lite.settings import GistSettings
from memorag.lite.text_windows import GistWindow
from memorag.prompting import prompts

if TYPE_CHECKING:
    from memorag.generation.base import Generator

# Tokens kept for the user's question inside a clue or answer prompt read after the memory.
QUESTION_TOKENS = 64


class GistMemoryTooLongError(ValueError):
    """A text whose gists cannot fit the generator's positions (refused before any gist is written)."""


@dataclass(frozen=True)
class GistBudget:
    """`per_gist`: the most new tokens each new gist may take; `positions`: the generator's; `reserved`:
    what the memory's frame, a question prompt and its reply take; `held`: the gists already written."""

    per_gist: int
    positions: int
    reserved: int
    held: int


def plan_gist_budget(generator: Generator, new: Sequence[GistWindow], memory: GistMemory, settings: GistSettings,
                     reply_tokens: int, language: str = "en") -> GistBudget:
    """The budget of the gists of `new` windows after `memory`'s, for replies of `reply_tokens`;
    raises `GistMemoryTooLongError`, naming the fixes, when a gist would get under `min_gist_tokens`
    or a window and its gist would not fit the generator."""
    positions = generator.context_window
    if not positions:
        raise GistMemoryTooLongError(
            f"the positions of {generator.name} are unknown, so the gists cannot be sized to fit them; give them "
            "with --set generator_window=N (e.g. the server's context size)")
    empty = generator.count_tokens("")
    frame = generator.count_tokens(prompts.fill(prompts.LITE_CONTEXT, language, context="")
                                   + _longest_question_prompt(language)) - empty
    reserved = empty + frame + QUESTION_TOKENS + reply_tokens
    held = generator.count_tokens(memory.text()) - empty if len(memory) else 0
    room = positions - reserved - held - (len(memory) + len(new))  # a line break joins each gist
    per_gist = min(settings.max_new_tokens, room // max(1, len(new)))
    if per_gist < settings.min_gist_tokens:
        fits = max(0, room // settings.min_gist_tokens)
        raise GistMemoryTooLongError(
            f"the text needs {len(new)} gists (windows of {settings.window_tokens} tokens) and the {positions} "
            f"positions of {generator.name} leave {max(room, 0)} tokens for them after {held} already written and "
            f"{reserved} for the prompts and replies: {max(per_gist, 0)} tokens a gist, under the "
            f"{settings.min_gist_tokens} asked (lite.min_gist_tokens). It fits {fits} such gists, about "
            f"{fits * settings.window_tokens:,} tokens of text. Use a generator with more positions (--generator, "
            "or --set generator_window=N for a server that reads more), larger windows if it reads them "
            "(--set lite.window_tokens=N), or shorter gists (--set lite.min_gist_tokens=N)")
    _check_windows_fit(generator, new, per_gist, language, positions)
    return GistBudget(per_gist, positions, reserved, held)


def _longest_question_prompt(language: str) -> str:
    asked = (prompts.LITE_SPANS, prompts.LITE_QUESTIONS, prompts.LITE_ANSWER, prompts.LITE_KEY_POINTS)
    return max((prompts.fill(prompt, language, question="") if "{question}" in prompt["en"]
                else prompts.fill(prompt, language) for prompt in asked), key=len)


def _check_windows_fit(generator: Generator, new: Sequence[GistWindow], per_gist: int, language: str,
                       positions: int) -> None:
    """Refuse windows whose gist prompt (counted for the longest, from its token count) and gist exceed
    the generator's positions."""
    if not new:
        return
    frame = generator.count_tokens(prompts.fill(prompts.LITE_GIST, language, context=""))
    longest = max(window.num_tokens for window in new)
    # the window is counted in the memory model's tokens: a generator with another tokenizer may read
    # more; a tenth more is kept for it
    need = frame + longest + longest // 10 + per_gist
    if need > positions:
        fitting = int((positions - frame - per_gist) / 1.1)
        raise GistMemoryTooLongError(
            f"a window of {longest} tokens, its gist prompt and a {per_gist}-token gist need about {need} positions; "
            f"{generator.name} reads {positions}: use smaller windows (--set lite.window_tokens={max(fitting, 1)})")
