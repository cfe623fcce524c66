"""The `hyde` mode: the generator writes a hypothetical answer passage, which retrieves beside the query.

HyDE (Gao et al. 2022): a passage that answers the question, even with wrong facts,
looks more like the passages that hold the answer than the question does. The
generator writes it (as in HyDE; the memory model is not used). The query and the
passage each retrieve `hits_per_query` chunks; the lists are fused with weights
`hyde_query_weight` for the query (default 1) and 1 for the passage, HyDE's equal
weighting of the query and its hypothetical document. The generator then answers from
the evidence as in `rag`. `Answer.clues` holds the passage (retrieval query 1).
"""

from __future__ import annotations

import logging

from memorag import prompts
from memorag.modes.base import Mode, register_mode
from memorag.pipeline.types import Answer, AskHooks, timed

logger = logging.getLogger(__name__)


@register_mode
class HyDEMode(Mode):
    """A hypothetical answer passage and the query retrieve together; the generator answers."""

    name = "hyde"
    tasks = ("qa",)
    default_task = "qa"

    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        rag = self.pipeline
        config = rag.config
        language = rag.language_of(query)
        timings: dict[str, float] = {}
        warnings: list[str] = []
        with timed(timings, "hypothesis"):
            reply = rag.generator.generate(prompts.fill(prompts.HYDE_PASSAGE, language, question=query),
                                           max_new_tokens=config.hyde_max_new_tokens)
        passages = [reply.strip()] if reply.strip() else []
        if not passages:
            warnings.append("hyde: the generator wrote no hypothetical passage; the query retrieved alone")
            logger.warning(warnings[-1])
        hooks.clues(passages)
        weights = [config.hyde_query_weight] + [1.0] * len(passages)
        return self.retrieve_and_answer(query, task, language, hooks, timings, [query, *passages], weights,
                                        clues=passages, raw={"hyde": reply}, warnings=warnings)
