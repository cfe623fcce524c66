"""The `rag` mode: standard retrieval-augmented generation with the query alone.

The evidence (the best chunks within `evidence_tokens`) goes to the generator best
first, in score order: the usual ("vanilla") RAG of the MemoRAG and DOS-RAG papers
(`evidence_order=document` reads it in document order instead). The `dos` mode is the
same retrieval read in document order, with a larger budget.
"""

from __future__ import annotations

from memorag.modes.base import Mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence_plan import RetrievalPlan
from memorag.modes.results import Answer, AskHooks


@register_mode
class RAGMode(Mode):
    """Standard RAG: the query alone retrieves (dense by default), the generator reads the
    chunks best first and answers."""

    name = "rag"
    description = "standard RAG: the question alone retrieves; the generator reads the best chunks"
    tasks = ("qa", "summarize")
    default_task = "qa"
    own_evidence_order = "best-first"

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        language = context.language_of(query)
        return self.retrieve_and_answer(context, query, task, language, hooks, {}, RetrievalPlan.fused([query]))
