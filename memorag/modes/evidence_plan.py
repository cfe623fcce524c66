"""How a query and its clues become evidence: the one rule, and the plan it makes.

`clue_plan(query, clues, settings, hits_per_query)` is the only place that turns the memory's
clues into a retrieval plan: which queries retrieve, their weights, how many hits each one
retrieves, and whether the lists are unioned or fused. Everything that retrieves with clues
executes the plan it returns (`EvidenceStep.retrieve`), so the same clues give the same
evidence through every path:

- the `memorag` mode (`MemoRAG.ask`), which then fits the ranking to its evidence budget;
- `memorag.pipeline.search.search`, and through it the LangChain and LlamaIndex retrievers,
  which return the ranking's first `k` chunks;
- clue recall (`memorag.evaluation.clue_recall`), which scores the ranking's first `k`.

The rule (`memorag_evidence`, a `PipelineConfig` setting):

- ``"reference"`` (the default; the official MemoRAG pipeline's `MemoRAG._retrieve` and
  `_handle_rag` in the qhjqhj00/MemoRAG repository): every clue retrieves its own `memorag_hits`
  chunks (its `ret_hit`, 3) and the query as many as the rag mode's (`hits_per_query`, 6, where the
  reference takes 3 for it too), so the memorag mode holds every chunk the rag mode can give; the lists are unioned and deduplicated, and every
  chunk of the union is kept, with no evidence budget, and read in the order of the text. The
  memory's draft answer (clue kind ``draft``) retrieves like every clue and is also given to the
  generator after the evidence as "The answer might be {draft}." (the reference's wording). So a
  clue can only add to what the query's own hits hold. When the answer prompt over the whole
  union is longer than the generator's window, it is cut, not refused: the chunks that clues
  alone found go first, from the end of the round-robin ranking (every clue's third hit before
  any second, the last clue's first); only if the query's own hits still do not fit are they cut,
  its lowest first. Each cut is named in the answer's warnings (`EvidenceStep.cut_warnings`).
- ``"union"`` (the bounded round-robin, for comparing modes at equal evidence): the same lists,
  unioned, deduplicated and taken round-robin by rank (every list's first hit before any second
  hit), then cut to `evidence_tokens` like every other mode's evidence, so a chunk that one clue
  alone finds ranks early and can push out one of the query's own. No draft is offered.
- ``"fusion"``: the query and every clue retrieve `hits_per_query` chunks; the lists are fused
  (the pipeline's `fusion` method) with the query weighing `query_weight` and each clue 1, so a
  chunk needs several clues agreeing to displace one of the query's hits; cut to `evidence_tokens`.

Retrieval alone (`search`, clue recall) ranks the ``reference`` union as ``union`` ranks it.

Other modes make their own plans (`RetrievalPlan.fused`); only clue-driven retrieval uses this rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RetrievalPlan:
    """What to retrieve: every query retrieves `hits_per_query` chunks (None: the pipeline's
    `hits_per_query` setting); the lists are unioned round-robin by rank (`union`) or fused,
    query i weighing `weights[i]`. `budgeted`: the ranking is cut to the evidence budget; False
    (the reference rule) keeps every hit and cuts only to the generator's window, the query's
    own hits last (`EvidenceStep.fit_ranked` with `clue_hits_first`)."""

    queries: tuple[str, ...]
    weights: tuple[float, ...]
    hits_per_query: int | None = None
    union: bool = False
    budgeted: bool = True
    query_hits: int | None = None  # the first query's (the user's own) hits, when more than `hits_per_query`

    def __post_init__(self) -> None:
        if len(self.weights) != len(self.queries):
            raise ValueError(f"{len(self.weights)} weights for {len(self.queries)} queries")
        if not self.budgeted and not self.union:
            raise ValueError("only a union is read whole (budgeted=False needs union=True)")

    @classmethod
    def fused(cls, queries: Sequence[str], weights: Sequence[float] | None = None,
              hits_per_query: int | None = None) -> RetrievalPlan:
        """Every query retrieves, the lists fused by weight (default: all weigh 1)."""
        weights = [1.0] * len(queries) if weights is None else weights
        return cls(tuple(queries), tuple(float(weight) for weight in weights), hits_per_query)


MEMORAG_EVIDENCE = ("reference", "union", "fusion")


class ClueEvidenceSettings(Protocol):
    """The settings the rule reads: `PipelineConfig` and the memorag mode's settings both have them."""

    memorag_evidence: str  # one of MEMORAG_EVIDENCE
    memorag_hits: int
    query_weight: float


def clue_plan(query: str, clues: Sequence[str], settings: ClueEvidenceSettings, hits_per_query: int) -> RetrievalPlan:
    """The retrieval plan of `query` and its `clues` (see the module docstring); `hits_per_query`
    is the pipeline's depth of a fused list."""
    queries = (query, *clues)
    weights = (float(settings.query_weight),) + (1.0,) * len(clues)
    if settings.memorag_evidence == "reference":
        return RetrievalPlan(queries, weights, settings.memorag_hits, union=True, budgeted=False,
                             query_hits=hits_per_query)
    if settings.memorag_evidence == "union":
        return RetrievalPlan(queries, weights, settings.memorag_hits, union=True)
    return RetrievalPlan(queries, weights, hits_per_query)


def offers_draft(settings: ClueEvidenceSettings) -> bool:
    """Whether the rule gives the generator the memory's draft answer ("The answer might be ...")."""
    return settings.memorag_evidence == "reference"
