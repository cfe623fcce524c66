"""The `mixpr` mode: Mixture-of-PageRanks retrieval over short sentence chunks.

`prepare` cuts the corpus into MixPR chunks (at most 32 words: sentences, then lines, then
even word splits; their tokens counted with the memory model's tokenizer for budgeting)
and builds the TF-IDF chunk graph of `memorag.retrieval.mixture_pagerank.MixPRRetriever`, whose
docstring states the PageRank convention (restart weight 0.6 local, 0 global; at most 18
iterations; dangling nodes spread their mass uniformly).

`answer` routes the request first. Task summarize is global. Task qa asks the generator
with the router prompt (`prompts.MIXPR_ROUTER`: the query and the first two and last two
chunks), or uses the rule-based router when `mixpr.router="rules"`. A router reply that
names neither local nor global falls back to the rule-based router, and a warning is
logged (the stated policy of `MixPRRetriever.route`). The best `mixpr.top_k` chunks, as
many as fit the pipeline's evidence budget (`evidence_tokens`, capped by the generator's
window), go to the generator in document order (or best first, with `evidence_order`).

The `Answer`: `evidence` are MixPR chunks (their `chunk_id` is their node in this mode's
graph, not one of `pipeline.chunks`); `extras["route"]` is the route taken and
`extras["router_reply"]` the generator's reply to the router prompt, when it was asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memorag.config import ConfigError
from memorag.modes.base import Mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.results import Answer, AskHooks, Evidence, timed
from memorag.prompting import prompts
from memorag.retrieval.chunking import chunk_documents_for_mixpr
from memorag.retrieval.hybrid import fit_to_budget
from memorag.retrieval.mixture_pagerank import MixPRRetriever, Route, route_rule_based

ROUTER_MAX_NEW_TOKENS = 16  # the router answers one word; a little room for a chatty model
MIXPR_ROUTERS: tuple[str, ...] = ("llm", "rules")


@dataclass
class MixPRSettings:
    """The mixpr mode's settings (`--set mixpr.router=rules`)."""

    router: Literal["llm", "rules"] = "llm"  # local/global: ask the generator, or the rule-based router
    top_k: int = 100  # most chunks given to the generator (also capped by the evidence budget)

    def __post_init__(self) -> None:
        if self.router not in MIXPR_ROUTERS:
            raise ConfigError(f"mixpr.router={self.router!r}; choose one of {', '.join(MIXPR_ROUTERS)}")
        if self.top_k < 1:
            raise ConfigError(f"mixpr.top_k={self.top_k} must be at least 1")


@register_mode
class MixPRMode(Mode):
    """MixPR: personalized PageRank on a sparse TF-IDF graph of sentence chunks, routed local/global."""

    name = "mixpr"
    description = "PageRank over a graph of sentence chunks, routed local or global"
    tasks = ("qa", "summarize")
    default_task = "qa"
    settings_key = "mixpr"

    retriever: MixPRRetriever | None = None

    @classmethod
    def score_meaning(cls, config: Any) -> str:
        return ("the chunk's PageRank mass on the graph of sentence chunks, personalized to the question "
                "(higher is better)")

    def prepare(self, context: ModeContext) -> None:
        chunks = chunk_documents_for_mixpr(list(context.documents), tokenizer=context.tokenizer)
        retriever = MixPRRetriever()
        retriever.add(chunks)
        retriever.build()
        self.retriever, self._chunk_by_id = retriever, {chunk.id: chunk for chunk in chunks}

    def route(self, context: ModeContext, query: str, task: str, language: str) -> tuple[Route, str | None]:
        """The route for `query`, and the generator's router reply (None when it was not asked)."""
        assert self.retriever is not None, "the pipeline prepares a mode before it answers"
        if task == "summarize":
            return "global", None
        replies: list[str] = []

        def ask_generator(question: str, excerpts: Sequence[str]) -> str:
            prompt = prompts.fill(prompts.MIXPR_ROUTER, language, query=question,
                                  excerpts="\n\n".join(f"- {text}" for text in excerpts))
            replies.append(context.generator.generate(prompt, max_new_tokens=ROUTER_MAX_NEW_TOKENS))
            return replies[-1]

        if context.settings.router == "rules":
            return route_rule_based(query), None
        return self.retriever.route(query, router=ask_generator), (replies[0] if replies else None)

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        assert self.retriever is not None, "the pipeline prepares a mode before it answers"
        step = context.evidence
        language = context.language_of(query)
        timings: dict[str, float] = {}
        with timed(timings, "route"):
            route, reply = self.route(context, query, task, language)
        with timed(timings, "retrieve"):
            hits = self.retriever.search([query], context.settings.top_k, route=route)[0]  # best first
            kept = fit_to_budget(hits, self._chunk_by_id, step.budget(query, task, language))
            scores = {hit.chunk_id: hit.score for hit in hits}
            evidence = [
                Evidence(chunk.id, chunk.doc_id, chunk.title, chunk.start_char, chunk.end_char, chunk.num_tokens,
                         scores[chunk.id], [0], chunk.text, chunk.page, chunk.last_page, list(chunk.section))
                for chunk in kept
            ]
            prompt = step.fit_ranked(evidence, self.evidence_order(task) or "document", query, task, language)
        hooks.evidence(prompt.evidence)
        with timed(timings, "generate"):
            text = step.generate(prompt, hooks.on_text)
        extras = {"route": route} if reply is None else {"route": route, "router_reply": reply}
        return Answer(query, task, self.name, text, [], prompt.evidence, timings, context.generator.name,
                      extras=extras)
