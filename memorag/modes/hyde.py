"""The `hyde` mode: the generator writes a hypothetical answer passage, which retrieves beside the query.

HyDE (Gao et al. 2022): a passage that answers the question, even with wrong facts,
looks more like the passages that hold the answer than the question does. The
generator writes it (as in HyDE; the memory model is not used). The query and the
passage each retrieve `hits_per_query` chunks; the lists are fused with weights
`hyde.query_weight` for the query (default 1) and 1 for the passage, HyDE's equal
weighting of the query and its hypothetical document. The generator then answers from
the evidence as in `rag`. `Answer.clues` holds the passage (retrieval query 1).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memorag.config import ConfigError
from memorag.modes.base import Mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence_plan import RetrievalPlan
from memorag.modes.results import Answer, AskHooks, timed
from memorag.modes.scores import fused_score
from memorag.prompting import prompts

logger = logging.getLogger(__name__)


@dataclass
class HyDESettings:
    """The hyde mode's settings (`--set hyde.max_new_tokens=...`)."""

    max_new_tokens: int = 128  # the hypothetical answer passage
    query_weight: float = 1.0  # fusion weight of the query's own hits (the passage's weigh 1)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ConfigError(f"hyde.max_new_tokens={self.max_new_tokens} must be at least 1")
        if not 0 < self.query_weight < float("inf"):
            raise ConfigError(f"hyde.query_weight={self.query_weight} must be a finite number above 0")


@register_mode
class HyDEMode(Mode):
    """A hypothetical answer passage and the query retrieve together; the generator answers."""

    name = "hyde"
    description = "the generator writes hypothetical answer passages, which retrieve beside the question"
    tasks = ("qa",)
    default_task = "qa"
    settings_key = "hyde"

    @classmethod
    def score_meaning(cls, config: Any) -> str:
        return fused_score(config.fusion, f"the question's list (weight {config.hyde.query_weight:g}) and each "
                                          "hypothetical passage's (weight 1)")

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        settings: HyDESettings = context.settings
        language = context.language_of(query)
        timings: dict[str, float] = {}
        warnings: list[str] = []
        with timed(timings, "hypothesis"):
            reply = context.generator.generate(prompts.fill(prompts.HYDE_PASSAGE, language, question=query),
                                               max_new_tokens=settings.max_new_tokens)
        passages = [reply.strip()] if reply.strip() else []
        if not passages:
            warnings.append("hyde: the generator wrote no hypothetical passage; the query retrieved alone")
            logger.warning(warnings[-1])
        hooks.clues(passages)
        plan = RetrievalPlan.fused([query, *passages], [settings.query_weight] + [1.0] * len(passages))
        return self.retrieve_and_answer(context, query, task, language, hooks, timings, plan,
                                        clues=passages, raw={"hyde": reply}, warnings=warnings)
