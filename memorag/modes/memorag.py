"""The `memorag` mode: the memory writes clues, the clues and the query retrieve, the generator answers.

The evidence is built as the reference pipeline builds it (`memorag_evidence="union"`): the
query and every clue retrieve their own `memorag_hits` (3) chunks, the hits are unioned and
deduplicated, and when `evidence_tokens` cannot hold them all they are taken round-robin by
rank (every query's first hit before any second hit), then given in document order. So a
chunk that one clue alone finds reaches the generator. `memorag_evidence="fusion"` fuses the
lists instead (each `hits_per_query` long, the query's weighing `query_weight`, each clue's 1),
where a chunk needs several clues agreeing to displace one of the query's hits.
"""

from __future__ import annotations

from memorag.modes.base import Mode, register_mode
from memorag.pipeline.types import Answer, AskHooks, Corpus, timed


@register_mode
class MemoRAGMode(Mode):
    """The paper's system: the memory drives retrieval (clues), the generator answers."""

    name = "memorag"
    tasks = ("memorag", "qa", "summarize")
    default_task = "memorag"
    needs_memory = True
    tasks_without_evidence = ("qa",)  # the memory model answers from its memory alone

    def prepare(self, corpus: Corpus) -> None:
        self.pipeline.ensure_memory()

    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        rag = self.pipeline
        language = rag.language_of(query)
        timings: dict[str, float] = {}
        if task == "qa":
            with timed(timings, "generate"):
                text = rag.answer_from_memory(query, language, hooks.on_text)
            return Answer(query, task, self.name, text, timings=timings, generator=f"{rag.memory_model.name} (memory)")
        with timed(timings, "clues"):
            clues, raw = rag.write_clues(query, task, language, show_progress=hooks.show_progress)
        hooks.clues(clues)
        config = rag.config
        weights = [config.query_weight] + [1.0] * len(clues)
        union = config.memorag_evidence == "union"
        return self.retrieve_and_answer(query, task, language, hooks, timings, [query, *clues], weights,
                                        clues=clues, raw=raw, union=union,
                                        k=config.memorag_hits if union else None)

