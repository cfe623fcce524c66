"""Who writes the clues the clue-recall evaluation scores: the memory, or a reference that bounds it.

- ``memory``: the memory model, from its memory of the context (`MemoRAG.clues`): what the
  pipeline does.
- ``full-context``: the memory model's frozen base reading the whole context uncompressed,
  asked the same clue prompts in the same layout: the same token ids the memory path reads,
  with the context's own key-value rows where the memory's compressed rows would be, decoded
  greedily with the same stop tokens, parsed by the same rules. What a memory that lost
  nothing would let this base write: an upper reference for the memory's clues.
- ``answer``: the example's first gold answer as the one clue: what a perfect draft answer
  retrieves with this retriever, k and evidence rule.

The references need no memory; only ``memory`` builds one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from memorag.cache_argument import cache_kwargs
from memorag.datasets.schema import EvalExample
from memorag.generation.prefix_cache import PrefixCache
from memorag.memory.chat import context_ids, continuation_ids
from memorag.modes.memorag import clue_requests, clues_from_replies
from memorag.pipeline.helpers import memory_text
from memorag.stop_tokens import stop_token_ids

if TYPE_CHECKING:
    from memorag.memory import MemoryModel
    from memorag.pipeline import MemoRAG

CLUE_SOURCES = ("memory", "full-context", "answer")


def needs_memory(source: str) -> bool:
    check_source(source)
    return source == "memory"


def check_source(source: str) -> None:
    if source not in CLUE_SOURCES:
        raise ValueError(f"clue source {source!r} is not one of {', '.join(CLUE_SOURCES)}")


def write_clues(source: str, rag: MemoRAG, example: EvalExample) -> tuple[list[str], dict[str, str]]:
    """The clues for `example`'s question written by `source` over `rag`'s memorized documents, and
    the raw replies by clue kind (the answer source's one reply is the answer)."""
    check_source(source)
    if source == "memory":
        return rag.clues(example.question, task="memorag")
    if source == "answer":
        if not example.answers or not example.answers[0].strip():
            raise ValueError(f"example {example.id} has no gold answer to use as a clue")
        return [example.answers[0].strip()], {"answer": example.answers[0]}
    return full_context_clues(rag, example.question)


def full_context_clues(rag: MemoRAG, question: str) -> tuple[list[str], dict[str, str]]:
    """The clue prompts answered by the memory model's base with `rag`'s documents read in full."""
    context = rag.context("memorag")  # the mode's settings and language rule, as `MemoRAG.clues` reads them
    settings = context.settings
    query = question.strip()
    requests = clue_requests(settings, query, "memorag", context.language_of(query))
    model = rag.memory_model
    context, chat = context_ids(model.tokenizer, model.layout, memory_text(rag.documents), None)
    prefix = PrefixCache(model.base_model)  # the context is read once; each prompt reads only its own tokens
    raw = {kind: full_context_reply(model, context + continuation_ids(model.tokenizer, model.layout, prompt, chat),
                                    settings.clue_max_new_tokens, prefix.past_for(context))
           for kind, (prompt, _) in requests.items()}
    return clues_from_replies(requests, raw, query, settings), raw


@torch.no_grad()
def full_context_reply(model: MemoryModel, ids: list[int], max_new_tokens: int, cache=None) -> str:
    """Greedy reply of the memory model's frozen base to `ids` read uncompressed (no memory token
    anywhere), ending before the first stop token, as the memory model's decoding ends its replies;
    `cache`: the base's key-value cache over a prefix of `ids` (`PrefixCache.past_for`), which it extends."""
    from transformers import GenerationConfig

    if len(ids) + max_new_tokens > model.max_positions:
        raise ValueError(f"{len(ids)} prompt tokens and {max_new_tokens} new ones exceed the base's "
                         f"{model.max_positions} positions; use a shorter context")
    stops = stop_token_ids(model.tokenizer, model.base_model)
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stops or None,
                              pad_token_id=stops[0] if stops else 0)
    input_ids = torch.tensor([ids], dtype=torch.long, device=model.device)
    output = model.base_model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                       generation_config=config, **cache_kwargs(cache))
    reply = []
    for token in output[0, len(ids):].tolist():
        if token in stops:
            break
        reply.append(int(token))
    return model.tokenizer.decode(reply, skip_special_tokens=True)
