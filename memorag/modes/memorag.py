"""The `memorag` mode: the memory writes clues, the clues and the query retrieve, the generator answers.

How the query and the clues become evidence is the one rule of `memorag.modes.evidence_plan`
(by default the reference pipeline's: the query and every clue retrieve their own
`memorag_hits` chunks, the whole union is read in document order, cut only to the generator's
window with the clues' hits first out, and the memory's draft answer is offered as "The answer
might be ..."; `memorag_evidence="union"` cuts the round-robin ranking to `evidence_tokens`
instead). `search` and the LangChain and LlamaIndex retrievers return the ranking, cut to their `k`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from tqdm.auto import tqdm

from memorag.config import config_view
from memorag.modes.base import Mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence_plan import clue_plan, offers_draft
from memorag.modes.results import Answer, AskHooks, timed
from memorag.modes.scores import fused_score
from memorag.prompting import prompts
from memorag.prompting.clues import combine_clues, parse_clues

# The clue bar: "writing clues 0/3 [00:06, spans + questions + draft]", the kinds being written.
_CLUE_BAR = "{desc} {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
# How `write_clues` decodes several clue kinds: one exact batch, a batch sharing its matrix products, or in turn.
CLUE_DECODINGS = ("batch", "shared", "one-by-one")


@dataclass(frozen=True)
class MemoRAGSettings:
    """The memorag mode's settings: `PipelineConfig` fields of the same names, kept at the top level
    because retrieval alone (`memorag.pipeline.search`) and the evaluations use them too; the
    evidence ones are read by `memorag.modes.evidence_plan.clue_plan`."""

    clue_kinds: tuple[str, ...]
    max_clues: int
    clue_max_new_tokens: int
    memorag_evidence: str  # "reference", "union" or "fusion" (`evidence_plan.MEMORAG_EVIDENCE`)
    memorag_hits: int
    query_weight: float
    answer_max_new_tokens: int


@register_mode
class MemoRAGMode(Mode):
    """The paper's system: the memory drives retrieval (clues), the generator answers."""

    name = "memorag"
    description = "the memory reads the whole corpus and writes clues; the question and the clues retrieve"
    tasks = ("memorag", "qa", "summarize")
    default_task = "memorag"
    reads: ClassVar[str] = "memory"  # what the memory model answers and writes clues from (the Answer's label)
    needs_memory = True
    tasks_without_evidence = ("qa",)  # the memory model answers from its memory alone

    @classmethod
    def score_meaning(cls, config: Any) -> str:
        if config.memorag_evidence == "fusion":
            return fused_score(config.fusion, f"the question's list (weight {config.query_weight:g}) and each clue's "
                                              "(weight 1)")
        return ("the chunk's place in the union of the question's and the clues' lists, taken round-robin by rank: "
                "1 / (1 + place), so 1.000 is the first taken, 0.500 the second; it says only that order")

    @classmethod
    def settings_of(cls, config: Any) -> MemoRAGSettings:
        return config_view(MemoRAGSettings, config)

    def prepare(self, context: ModeContext) -> None:
        _ = context.memory  # built now, if `memorize` was told not to

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        settings: MemoRAGSettings = context.settings
        language = context.language_of(query)
        timings: dict[str, float] = {}
        if task == "qa":
            with timed(timings, "generate"):
                text = self.answer_from_memory(context, query, language, hooks.on_text)
            return Answer(query, task, self.name, text, timings=timings,
                          generator=f"{context.memory_model.name} ({self.reads})")
        with timed(timings, "clues"):
            clues, raw = self.write_clues(context, query, task, language, show_progress=hooks.show_progress)
        hooks.clues(clues)
        plan = clue_plan(query, clues, settings, context.shared.hits_per_query)
        draft = draft_from_replies(raw, query, language) if offers_draft(settings) else ""
        return self.retrieve_and_answer(context, query, task, language, hooks, timings, plan, clues=clues, raw=raw,
                                        draft=draft)

    def answer_from_memory(self, context: ModeContext, query: str, language: str,
                           on_text: Callable[[str], None] | None = None) -> str:
        """The memory model's answer to `query` from its memory alone (task qa), streamed to `on_text`."""
        from memorag.generation import TextStream

        memory_model = context.memory_model
        stream = TextStream(memory_model.tokenizer, on_text)
        memory_model.generate(
            prompts.fill(prompts.MEMORY_ANSWER, language, question=query),
            memory=context.memory,
            max_new_tokens=context.settings.answer_max_new_tokens,
            on_token=lambda token: stream.push([token]),
        )
        return stream.finish().strip()

    def write_clues(self, context: ModeContext, query: str, task: str, language: str,
                    show_progress: bool = False, decoding: str = "batch") -> tuple[list[str], dict[str, str]]:
        """The memory model's clues (or key points, for `summarize`) and its raw replies;
        `show_progress`: a bar on stderr naming the clue kinds being written, with the seconds spent.

        `decoding`: "batch" (default) decodes the clue kinds together as one batch over the
        memory, each reply equal token for token to its one-by-one decoding; "shared" shares
        the batch's matrix products (a reply can differ where two tokens tie; logged);
        "one-by-one" decodes the kinds in turn (benchmarks/pipeline.py compares the three)."""
        settings: MemoRAGSettings = context.settings
        memory = context.memory
        requests = clue_requests(settings, query, task, language)
        kinds = list(requests)
        check_decoding(decoding)
        raw: dict[str, str] = {}
        with tqdm(total=len(requests), desc="writing clues", unit="kind", disable=not show_progress,
                  file=sys.stderr, bar_format=_CLUE_BAR) as bar:
            if decoding == "one-by-one" or len(kinds) == 1:
                for kind in kinds:
                    bar.set_postfix_str(kind)
                    raw[kind] = context.memory_model.generate(requests[kind][0], memory=memory,
                                                              max_new_tokens=settings.clue_max_new_tokens)
                    bar.update()
            else:  # one batch over the shared memory (memory/attention.py, `PackedStepRows`)
                bar.set_postfix_str(" + ".join(kinds))
                replies = context.memory_model.generate_batch([requests[kind][0] for kind in kinds], memory=memory,
                                                              max_new_tokens=settings.clue_max_new_tokens,
                                                              exact=decoding == "batch")
                raw.update(zip(kinds, replies, strict=True))
                bar.update(len(kinds))
        return clues_from_replies(requests, raw, query, settings), raw


def check_decoding(decoding: str) -> None:
    if decoding not in CLUE_DECODINGS:
        raise ValueError(f"decoding={decoding!r} is not one of {', '.join(CLUE_DECODINGS)}")


def clue_requests(settings: MemoRAGSettings, query: str, task: str, language: str) -> dict[str, tuple[str, bool]]:
    """The prompt of each clue kind the memory is asked (key points for `summarize`), and whether its
    reply is split into lines: what `MemoRAGMode.write_clues` asks, whoever answers it."""
    if task == "summarize":
        focus = prompts.fill(prompts.KEY_POINTS_FOCUS, language, request=query)
        return {"key_points": (prompts.fill(prompts.MEMORY_KEY_POINTS, language, focus=focus), True)}
    templates = {"spans": prompts.CLUE_INSTRUCTION, "questions": prompts.MEMORY_QUESTIONS, "draft": prompts.MEMORY_DRAFT}
    return {kind: (prompts.fill(templates[kind], language, question=query), kind != "draft")
            for kind in settings.clue_kinds}


def clues_from_replies(requests: dict[str, tuple[str, bool]], raw: dict[str, str], query: str,
                       settings: MemoRAGSettings) -> list[str]:
    """The retrieval clues in the raw replies to `requests` (`clue_requests`), cleaned and combined."""
    groups = [parse_clues(raw[kind], prompt=prompt, query=query, split_lines=split_lines, max_clues=settings.max_clues)
              for kind, (prompt, split_lines) in requests.items()]
    return combine_clues(groups, settings.max_clues, query)


def draft_from_replies(raw: dict[str, str], query: str, language: str) -> str:
    """The memory's draft answer as the reference rule offers it to the generator: the ``draft``
    reply of `raw` cleaned as one clue (`parse_clues`, echoes and labels dropped), or "" when no
    draft was asked (not among `clue_kinds`, or the task `summarize`) or none is usable."""
    if "draft" not in raw:
        return ""
    prompt = prompts.fill(prompts.MEMORY_DRAFT, language, question=query)
    found = parse_clues(raw["draft"], prompt=prompt, query=query, split_lines=False, max_clues=1)
    return found[0] if found else ""
