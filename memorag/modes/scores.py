"""What `Evidence.score` means, in words a reader of the evidence can use: each retrieval mode
scores its evidence by the ranking it retrieved with (`memorag.retrieval.hybrid`), so the same
number means different things in different modes.

`fused_score(fusion, lists)` says it for a plan whose lists are fused (`RetrievalPlan.fused`,
`EvidenceStep.retrieve`): reciprocal-rank fusion gives weight / (60 + rank) summed over the lists
(rank 1 of one list is 1/61, 0.016); score fusion scales each list's scores to 0-1 and sums them
by weight. `ORDER_WORDS` says each evidence order (`Mode.evidence_order`) as the list reads.
"""

from __future__ import annotations

ORDER_WORDS = {
    "document": "in the order of the documents (as memorized, then by place in each), as the generator reads it",
    "best-first": "best first (by score), as the generator reads it",
}


def fused_score(fusion: str, lists: str) -> str:
    """The meaning of a fused ranking's score (`fusion`: "rrf" or "score") over `lists` (e.g. "the
    question's list")."""
    if fusion == "rrf":
        return (f"reciprocal-rank fusion of {lists}: weight / (60 + rank) summed over the lists, "
                "so rank 1 of one list weighing 1 scores 0.016; higher is better")
    return f"the retriever's scores in {lists}, each list scaled to 0-1 (its best 1), summed by weight"


def one_list_score(fusion: str) -> str:
    """The meaning of a ranking of the question's list alone."""
    if fusion == "rrf":
        return "1 / (60 + rank) in the question's own list (reciprocal-rank fusion of one list): 0.016 is rank 1"
    return "the retriever's score for the question, scaled to 0-1 over its hits (the best 1)"
