"""The `rag` mode: standard retrieval-augmented generation with the query alone.

The evidence (the best chunks within `evidence_tokens`) goes to the generator best
first, in score order: the usual ("vanilla") RAG of the MemoRAG and DOS-RAG papers.
The `dos` mode is the same retrieval read in document order, with a larger budget.
"""

from __future__ import annotations

from memorag.modes.base import Mode, register_mode
from memorag.pipeline.types import Answer, AskHooks, timed


@register_mode
class RAGMode(Mode):
    """Standard RAG: the query alone retrieves (dense by default), the generator reads the
    chunks best first and answers."""

    name = "rag"
    tasks = ("qa", "summarize")
    default_task = "qa"

    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        rag = self.pipeline
        language = rag.language_of(query)
        timings: dict[str, float] = {}
        with timed(timings, "retrieve"):
            kept = rag.gather_evidence([query], [1.0], task, query, language)
            evidence = sorted(kept, key=lambda item: -item.score)  # stable: ties keep document order
        hooks.evidence(evidence)
        with timed(timings, "generate"):
            text = rag.generate_from_evidence(query, evidence, task, language, hooks.on_text)
        return Answer(query, task, self.name, text, [], evidence, timings, rag.generator.name)
