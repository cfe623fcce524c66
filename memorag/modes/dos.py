"""The `dos` mode: DOS-RAG, retrieve with the query, then read the chunks in document order.

DOS-RAG (Laitenberger et al. 2025, "document's original structure"): the query alone
retrieves, the best chunks that fit the budget are kept, and the reader gets them in
the order they stand in the documents rather than by score. With budgets of several
thousand tokens this simple baseline matches much heavier systems, so its budget is
`dos_evidence_tokens` (default 8192, capped by the generator's window), not the
`evidence_tokens` that `rag` uses. Enough hits are retrieved to fill it with full-size
chunks, plus `hits_per_query` for shorter ones at documents' ends.

`rag` differs in order only at equal budgets: it gives the chunks best first.
"""

from __future__ import annotations

import math

from memorag.modes.base import Mode, register_mode
from memorag.pipeline.types import Answer, AskHooks


@register_mode
class DOSRAGMode(Mode):
    """The query retrieves a large budget of chunks; the generator reads them in document order."""

    name = "dos"
    tasks = ("qa", "summarize")
    default_task = "qa"

    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        rag = self.pipeline
        config = rag.config
        language = rag.language_of(query)
        budget = rag.evidence_budget(query, task, language, config.dos_evidence_tokens)
        k = math.ceil(budget / config.chunk_tokens) + config.hits_per_query
        # the best chunks within the budget, in document order
        return self.retrieve_and_answer(query, task, language, hooks, {}, [query], [1.0], max_tokens=budget, k=k)
