"""The `full` mode: the whole corpus as context, cut in the middle to the generator's window.

LongBench's rule: when the context is longer than the budget, keep its first half and
its last half of the budget's tokens and drop the middle (the start and the end of a
long text usually matter most). The budget is what the generator's window leaves after
the prompt and the answer. Here only the context is cut (LongBench cuts the whole
prompt; its instructions sit at both ends, so they survive, as ours do untouched).

The corpus is the documents in order, counted in the pipeline's tokenizer (the one
chunks are counted in); the prompt is then counted in the generator's own tokens, and
the budget shrinks by any excess until it fits. The kept pieces are the evidence
(`chunk_id` NO_CHUNK): whole documents, the head's last document up to the cut, the tail's
first document from the cut, each with exact character offsets. They are shown as
passages (`render_passages`), which merges two pieces of one document only where they
touch, i.e. when what was dropped between them is a single character.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memorag.errors import PipelineError
from memorag.modes.base import Mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence import AnswerPrompt
from memorag.modes.results import NO_CHUNK, Answer, AskHooks, Evidence, cited_evidence, timed
from memorag.retrieval.chunking import token_spans


@register_mode
class FullMode(Mode):
    """The corpus, truncated in the middle to the generator's window, then answered."""

    name = "full"
    description = "no retrieval: the corpus itself, cut in the middle to the generator's window"
    tasks = ("qa", "summarize")
    default_task = "qa"
    own_evidence_order = None  # reads the corpus itself, nothing ranked

    @classmethod
    def score_meaning(cls, config: Any) -> str:
        return "none (always 0): this mode reads the corpus itself, nothing is ranked"

    def __init__(self, evidence_order: str = "own"):
        super().__init__(evidence_order)
        self._token_spans: list[np.ndarray] | None = None
        self._documents: tuple = ()

    def prepare(self, context: ModeContext) -> None:
        self._documents = context.documents
        tokenizer = context.tokenizer
        self._token_spans = [np.asarray(token_spans(tokenizer, document.text), dtype=np.int64).reshape(-1, 2)
                             for document in self._documents]  # each [N_tokens, 2]

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        language = context.language_of(query)
        timings: dict[str, float] = {}
        warnings: list[str] = []
        with timed(timings, "truncate"):
            prompt = self.fit(context, query, task, language)
        evidence = prompt.evidence
        total = sum(len(spans) for spans in self.token_spans())
        kept = sum(item.num_tokens for item in evidence)
        if kept < total:
            warnings.append(f"full: the corpus has {total} tokens; the generator's window takes {kept}, so the "
                            f"first {kept // 2} and the last {kept // 2} were kept and the "
                            f"{total - kept} in the middle dropped")
        hooks.evidence(evidence)
        with timed(timings, "generate"):
            text = context.evidence.generate(prompt, hooks.on_text)
        return Answer(query, task, self.name, text, [], evidence, timings, context.generator.name, warnings=warnings)

    def token_spans(self) -> list[np.ndarray]:
        """Each document's tokens as (start, end) character offsets ([N_tokens, 2]), in the
        pipeline's tokenizer; computed once per corpus, by `prepare`."""
        if self._token_spans is None:
            raise PipelineError("the full mode is not prepared yet; ask a question first")
        return self._token_spans

    def fit(self, context: ModeContext, query: str, task: str, language: str) -> AnswerPrompt:
        """The answer prompt over the corpus cut to what the generator's window leaves (see the
        module docstring), each try rendered and measured once."""
        step = context.evidence
        budget = step.room_without_evidence(query, task, language)
        if budget is None:
            raise PipelineError(f"the full mode cuts the corpus to the generator's window, and the window of "
                                f"{context.generator.name} is unknown; set generator_window")
        while True:
            if budget < 2:
                raise PipelineError("the generator's window leaves no room for the corpus after the prompt and the "
                                    "answer; shorten the query or lower answer_max_new_tokens")
            prompt = step.measure(query, task, language, self.head_and_tail(budget))
            left = step.room_in(prompt)
            assert left is not None  # the window is known (checked above)
            if left >= 0:
                return prompt
            budget = min(budget - 1, budget + left)

    def head_and_tail(self, budget: int) -> list[Evidence]:
        """The whole corpus if it has at most `budget` tokens, else its first `budget // 2`
        and last `budget // 2` tokens, as pieces of documents in corpus order."""
        documents = self._documents
        spans = self.token_spans()
        if sum(len(tokens) for tokens in spans) <= budget:
            return [self._piece(number, 0, len(spans[number])) for number in range(len(documents))]
        half = budget // 2
        head: list[Evidence] = []
        left = half
        for number, tokens in enumerate(spans):
            if left == 0:
                break
            take = min(left, len(tokens))
            if take:
                head.append(self._piece(number, 0, take))
            left -= take
        tail: list[Evidence] = []
        left = half
        for number in reversed(range(len(spans))):
            if left == 0:
                break
            take = min(left, len(spans[number]))
            if take:
                tail.append(self._piece(number, len(spans[number]) - take, len(spans[number])))
            left -= take
        return head + tail[::-1]

    def _piece(self, number: int, first: int, stop: int) -> Evidence:
        """Tokens `first`..`stop`-1 of document `number`; a piece that reaches a document's
        start or end takes the text up to it (whitespace around the tokens included)."""
        document = self._documents[number]
        tokens = self.token_spans()[number]
        start = 0 if first == 0 else int(tokens[first, 0])
        end = len(document.text) if stop == len(tokens) else int(tokens[stop - 1, 1])
        return cited_evidence(NO_CHUNK, document, start, end, stop - first, 0.0, [], document.text[start:end])
