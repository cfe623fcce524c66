"""The `memorag-full` mode: `memorag` with the whole corpus read uncompressed where the memory would be.

The same prompts, settings, clue parsing, evidence rule and generator as the `memorag` mode; only
the reader differs: the memory model's frozen base reads the corpus's whole text, laid out as the
memory reads it, and answers the memory's own prompts (the clue prompts for the tasks `memorag`
and `summarize`, the answer prompt for `qa`). A memory that lost
nothing would give what this mode gives, so it is the reference for what the memory loses: the
evaluations run it beside `memorag` (e.g. needles answered from memory alone against the same
needles answered with the whole haystack in view). It builds no memory; a corpus longer than the
base's positions is refused.

The replies (`full_context_replies`) are the base's over the same token ids the memory path reads:
the corpus laid out in the chat template, then each prompt's continuation (`memorag/prompting/chat_layout.py`),
with the corpus's own key-value rows where the memory's compressed rows would be, greedy, ending
before the same stop tokens. The corpus is read once and each prompt reads only its own tokens after
it (`PrefixCache`). The clue-recall evaluation's `full-context` source is this mode's clues. Torch
and the models' modules load only when the mode answers, as for every mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memorag.modes.base import register_mode
from memorag.modes.context import ModeContext
from memorag.modes.memorag import MemoRAGMode, check_decoding, clue_requests, clues_from_replies
from memorag.modes.results import memory_text
from memorag.prompting import prompts

if TYPE_CHECKING:  # the models' modules load torch
    from memorag.memory import MemoryModel


@register_mode
class MemoRAGFullMode(MemoRAGMode):
    """The memorag mode's questions answered by the memory model's base over the whole corpus."""

    name = "memorag-full"
    description = "memorag with the clues written by the memory model's base over the whole, uncompressed text"
    needs_memory = False
    reads = "full context"

    def prepare(self, context: ModeContext) -> None:
        """Nothing to build: no memory is read."""

    def answer_from_memory(self, context: ModeContext, query: str, language: str,
                           on_text: Callable[[str], None] | None = None) -> str:
        prompt = prompts.fill(prompts.MEMORY_ANSWER, language, question=query)
        text = self.replies(context, [prompt], context.settings.answer_max_new_tokens)[0].strip()
        if on_text is not None:
            on_text(text)
        return text

    def write_clues(self, context: ModeContext, query: str, task: str, language: str,
                    show_progress: bool = False, decoding: str = "batch") -> tuple[list[str], dict[str, str]]:
        """The clue prompts answered over the whole corpus, one after another after the corpus is read once
        (`decoding` is checked and `show_progress` accepted, as `memorag` takes them; neither changes it)."""
        check_decoding(decoding)
        requests = clue_requests(context.settings, query, task, language)
        replies = self.replies(context, [prompt for prompt, _ in requests.values()], context.settings.clue_max_new_tokens)
        raw = dict(zip(requests, replies, strict=True))
        return clues_from_replies(requests, raw, query, context.settings), raw

    @staticmethod
    def replies(context: ModeContext, asked: list[str], max_new_tokens: int) -> list[str]:
        return full_context_replies(context.memory_model, memory_text(context.documents), asked, max_new_tokens)


def full_context_replies(model: MemoryModel, text: str, asked: Sequence[str], max_new_tokens: int) -> list[str]:
    """The memory model's base's greedy reply to each prompt of `asked` after `text`, read uncompressed."""
    from memorag.generation.prefix_cache import PrefixCache
    from memorag.prompting.chat_layout import context_ids, continuation_ids

    context, chat = context_ids(model.tokenizer, model.layout, text, None)
    prompts_ids = [context + continuation_ids(model.tokenizer, model.layout, prompt, chat) for prompt in asked]
    for ids in prompts_ids:  # refused before the corpus is read, not after
        check_fits(model, len(ids), max_new_tokens)
    prefix = PrefixCache(model.base_model)
    return [full_context_reply(model, ids, max_new_tokens, prefix.past_for(context)) for ids in prompts_ids]


def check_fits(model: MemoryModel, num_ids: int, max_new_tokens: int) -> None:
    """Refuse a prompt (and its reply) longer than the positions the base reads uncompressed."""
    from memorag.memory.schedule import ContextTooLongError

    if num_ids + max_new_tokens > model.max_positions:
        raise ContextTooLongError(
            f"{num_ids} prompt tokens and {max_new_tokens} new ones exceed the {model.max_positions} positions "
            f"{model.name} reads uncompressed; use a shorter context, or the memory (mode memorag) for a long one")


def full_context_reply(model: MemoryModel, ids: list[int], max_new_tokens: int, cache=None) -> str:
    """Greedy reply of the memory model's frozen base to `ids` read uncompressed (no memory token
    anywhere), ending before the first stop token, as the memory model's decoding ends its replies;
    `cache`: the base's key-value cache over a prefix of `ids` (`PrefixCache.past_for`), which it extends."""
    import torch
    from transformers import GenerationConfig

    from memorag.runtime.cache_argument import cache_kwargs
    from memorag.runtime.stop_tokens import stop_token_ids

    check_fits(model, len(ids), max_new_tokens)
    stops = stop_token_ids(model.tokenizer, model.base_model)
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stops or None,
                              pad_token_id=stops[0] if stops else 0)
    input_ids = torch.tensor([ids], dtype=torch.long, device=model.device)
    with torch.no_grad():
        output = model.base_model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                           generation_config=config, **cache_kwargs(cache))
    reply = []
    for token in output[0, len(ids):].tolist():
        if token in stops:
            break
        reply.append(int(token))
    return model.tokenizer.decode(reply, skip_special_tokens=True)
