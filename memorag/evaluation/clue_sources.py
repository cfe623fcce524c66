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

from memorag.evaluation.datasets.schema import EvalExample

if TYPE_CHECKING:
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
    """The clue prompts answered by the memory model's base with `rag`'s documents read in full: the
    `memorag-full` mode's clues (memorag/modes/memorag_full.py)."""
    handler = rag.mode("memorag-full")
    context = rag.context(handler)  # the memorag mode's settings and language rule
    query = question.strip()
    return handler.write_clues(context, query, "memorag", context.language_of(query))
