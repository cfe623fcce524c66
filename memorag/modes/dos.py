"""The `dos` mode: DOS-RAG, retrieve with the query, then read the chunks in document order.

DOS-RAG (Laitenberger et al. 2025, "document's original structure"): the query alone
retrieves, the best chunks that fit the budget are kept, and the reader gets them in
the order they stand in the documents rather than by score. With budgets of several
thousand tokens this simple baseline matches much heavier systems, so its budget is
`dos.evidence_tokens` (default 8192, capped by the generator's window), not the
`evidence_tokens` that `rag` uses. Enough hits are retrieved to fill it with full-size
chunks, plus `hits_per_query` for shorter ones at documents' ends.

`rag` differs in order only at equal budgets: it gives the chunks best first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memorag.config import ConfigError
from memorag.modes.base import Mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence_plan import RetrievalPlan
from memorag.modes.results import Answer, AskHooks


@dataclass
class DOSSettings:
    """The dos mode's settings (`--set dos.evidence_tokens=...`); rag and the others use `evidence_tokens`."""

    evidence_tokens: int = 8192  # evidence budget (also capped by the generator's window)

    def __post_init__(self) -> None:
        if self.evidence_tokens < 1:
            raise ConfigError(f"dos.evidence_tokens={self.evidence_tokens} must be at least 1")


@register_mode
class DOSRAGMode(Mode):
    """The query retrieves a large budget of chunks; the generator reads them in document order."""

    name = "dos"
    description = "the question alone retrieves a large budget of chunks, read in document order"
    tasks = ("qa", "summarize")
    default_task = "qa"
    settings_key = "dos"

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        settings: DOSSettings = context.settings
        shared = context.shared
        language = context.language_of(query)
        budget = context.evidence.budget(query, task, language, settings.evidence_tokens)
        k = math.ceil(budget / shared.chunk_tokens) + shared.hits_per_query
        # the best chunks within the budget, in document order
        return self.retrieve_and_answer(context, query, task, language, hooks, {}, RetrievalPlan.fused([query], None, k),
                                        max_tokens=budget)
