"""The `rqrag` mode: the generator rewrites the query and breaks it into sub-questions; all retrieve.

RQ-RAG (Chan et al. 2024) refines a query before retrieving: rewriting it, decomposing
a multi-hop question into simpler ones. Here one prompt asks the generator for both, one
question per line (the rewrite first); the reply is cleaned by the clue parser, at most
`rqrag.max_queries` are kept. The query and each of them retrieve `hits_per_query`
chunks; the lists are fused with weight `rqrag.query_weight` for the query (default 1)
and 1 for each generated question. `Answer.clues` holds them (retrieval queries 1..).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from memorag.config import ConfigError
from memorag.modes.base import Mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence_plan import RetrievalPlan
from memorag.modes.results import Answer, AskHooks, timed
from memorag.modes.scores import fused_score
from memorag.prompting import prompts
from memorag.prompting.clues import combine_clues, parse_clues

logger = logging.getLogger(__name__)


@dataclass
class RQRAGSettings:
    """The rqrag mode's settings (`--set rqrag.max_queries=...`)."""

    max_queries: int = 4  # rewritten and sub-questions kept from the generator's reply
    max_new_tokens: int = 96
    query_weight: float = 1.0  # fusion weight of the query's own hits (each rewritten query's weigh 1)

    def __post_init__(self) -> None:
        for name in ("max_queries", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"rqrag.{name}={getattr(self, name)} must be at least 1")
        if not 0 < self.query_weight < float("inf"):
            raise ConfigError(f"rqrag.query_weight={self.query_weight} must be a finite number above 0")

# Labels a model puts before its lines ("Rewritten question:", "Sub-question 2:", "改写后的问题："),
# after an optional number or bullet; the clue parser knows the generic ones ("Question 1:").
_LABEL = re.compile(
    r"^\s*(?:[-*\u2022]\s*|\d{1,2}[.)]\s*)?"
    r"(?:(?:rewritten|rewrite|reworded|refined|search|simpler|sub-?)\s*(?:questions?|query|queries)?"
    r"|\u6539\u5199\u540e\u7684\u95ee\u9898|\u6539\u5199|\u5c0f\u95ee\u9898|\u5b50\u95ee\u9898)\s*\d{0,2}\s*[:\uff1a]\s*",
    re.IGNORECASE,
)


def parse_queries(reply: str, query: str, language: str, max_queries: int) -> list[str]:
    """The rewritten and sub-questions in the reply: labels, numbering and acknowledgements
    removed, repeats and echoes of `query` dropped, at most `max_queries`.

    The echo filter is given the instruction without the question: sub-questions are made
    of the question's own words by design, which the clue parser would otherwise drop as
    restatements of it.
    """
    lines = "\n".join(_LABEL.sub("", line, count=1) for line in reply.splitlines())
    instruction = prompts.fill(prompts.RQRAG_QUERIES, language, question="", max_queries=str(max_queries))
    found = parse_clues(lines, prompt=instruction, query="", max_clues=max_queries + 1)
    return combine_clues([found], max_queries, query)


@register_mode
class RQRAGMode(Mode):
    """Rewritten and decomposed queries retrieve beside the query; the generator answers."""

    name = "rqrag"
    description = "rewritten and sub-questions retrieve beside the question"
    tasks = ("qa",)
    default_task = "qa"
    settings_key = "rqrag"

    @classmethod
    def score_meaning(cls, config: Any) -> str:
        return fused_score(config.fusion, f"the question's list (weight {config.rqrag.query_weight:g}) and each "
                                          "rewritten or sub-question's (weight 1)")

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        settings: RQRAGSettings = context.settings
        language = context.language_of(query)
        timings: dict[str, float] = {}
        warnings: list[str] = []
        with timed(timings, "rewrite"):
            prompt = prompts.fill(prompts.RQRAG_QUERIES, language, question=query,
                                  max_queries=str(settings.max_queries))
            reply = context.generator.generate(prompt, max_new_tokens=settings.max_new_tokens)
            extra = parse_queries(reply, query, language, settings.max_queries)
        if not extra:
            warnings.append("rqrag: no rewritten or sub-question could be read from the generator's reply; the "
                            "query retrieved alone")
            logger.warning(warnings[-1])
        hooks.clues(extra)
        plan = RetrievalPlan.fused([query, *extra], [settings.query_weight] + [1.0] * len(extra))
        return self.retrieve_and_answer(context, query, task, language, hooks, timings, plan,
                                        clues=extra, raw={"rqrag": reply}, warnings=warnings)
