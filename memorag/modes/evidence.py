"""The evidence step every mode shares: retrieve, gather, fit the budget, render the prompt.

One `EvidenceStep` serves one question (the pipeline makes it for each `ask`). The
generator's room is counted in one place, `room_after`: its window less a prompt (counted
in the generator's own tokens) less the tokens kept for the reply. Everything else asks it:

- `room_for_evidence` is what the answer prompt without evidence leaves (counted once per
  question and task), kept at `TOKENIZER_MARGIN` because chunks are counted in the memory
  model's tokenizer; it raises `QueryTooLongError` when nothing would fit;
- `budget` is the evidence budget (`evidence_tokens`, or a mode's own) capped by that room;
- `fit_window` drops the lowest-scored evidence until the whole prompt fits;
- `room_left` is what a prompt over given evidence leaves (the full mode cuts to it);
- the cic mode, which writes its own prompt, fits its corpus with `room_after` itself.

`retrieve` executes a retrieval plan (`memorag.modes.evidence_plan`: every query retrieves,
the lists are fused by weight or unioned round-robin by rank), noting for each chunk every
list that fetched it (`FoundBy`: the query's text, the rank, the retriever's score); `gather` is
that ranking fitted to a budget (the best chunks that fit are kept, then `fit_window`);
`gather_whole` keeps the whole ranking (the reference rule: no budget), cut only to the
window, the chunks clues alone found first out (`cut_clue_hits_first`);
`order` puts evidence in document order or best first; `generate` renders the answer
prompt over the evidence (and the memory's draft answer, when one is offered: "The answer
might be ...") and asks the generator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memorag.prompting import prompts
from memorag.prompting.answer_forms import AnswerForm
from memorag.errors import EmptyCorpusError, PipelineError, QueryTooLongError
from memorag.modes.evidence_plan import RetrievalPlan
from memorag.modes.results import Evidence, FoundBy
from memorag.retrieval.base import Hit, Retriever
from memorag.retrieval.chunking import Chunk, Document

if TYPE_CHECKING:
    from memorag.generation.base import Generator

# Chunks are counted with the memory model's tokenizer, the generator's window with its own:
# evidence budgets keep this share of the room the window leaves.
TOKENIZER_MARGIN = 0.9


def chunk_evidence(chunk: Chunk, score: float, found_by: Mapping[int, Sequence[FoundBy]]) -> Evidence:
    """A retrieved chunk as `Evidence`: its place, its score (rounded to 6 places) and the retrieval
    lists that fetched it (`found_by`, as `EvidenceStep.retrieve` gives it; `Evidence.queries` are
    their query indices)."""
    lists = list(found_by.get(chunk.id, []))
    return Evidence(chunk.id, chunk.doc_id, chunk.title, chunk.start_char, chunk.end_char, chunk.num_tokens,
                    round(score, 6), list(dict.fromkeys(item.query_index for item in lists)), chunk.text,
                    chunk.page, chunk.last_page, list(chunk.section), lists)


def cut_clue_hits_first(evidence: Sequence[Evidence]) -> int:
    """The index of the item of `evidence` (a ranking, best first) to cut first when it does not fit:
    the last one that clues alone found, else (only the query's own hits left) the last one."""
    for index in range(len(evidence) - 1, -1, -1):
        if 0 not in evidence[index].queries:
            return index
    return len(evidence) - 1


@dataclass(frozen=True)
class EvidenceSettings:
    """The pipeline's settings the evidence step reads: `PipelineConfig` fields of the same names,
    read by name (`memorag.config.config_view`)."""

    hits_per_query: int
    fusion: str
    evidence_tokens: int
    answer_max_new_tokens: int
    summary_max_new_tokens: int


class EvidenceStep:
    """Retrieval, budgets and the answer prompt for one question; see the module docstring.

    `generator` is called on first use (the pipeline loads its models lazily); `documents`
    are the corpus in memorized order, `chunk_by_id` its chunks, `retriever` their index
    (None: nothing memorized), `answer_form` the answer prompt of this question.
    """

    def __init__(self, *, generator: Callable[[], Generator], documents: Sequence[Document],
                 chunk_by_id: Mapping[int, Chunk], retriever: Retriever | None, answer_form: AnswerForm,
                 settings: EvidenceSettings):
        self._generator = generator
        self.documents = documents
        self.chunk_by_id = chunk_by_id
        self.retriever = retriever
        self.answer_form = answer_form
        self.settings = settings
        self._rooms: dict[tuple[str, str, str], int | None] = {}

    @property
    def generator(self) -> Generator:
        return self._generator()

    # -- the answer prompt ----------------------------------------------------------------------
    def prompt(self, query: str, task: str, language: str, evidence: Sequence[Evidence], draft: str = "") -> str:
        """The answer prompt over `evidence`; a `draft` answer is offered after the passages, as the
        reference pipeline offers its memory's ("The answer might be ...", `prompts.DRAFT_OFFER`)."""
        passages = self.render_passages(evidence, language)
        if draft:
            offer = prompts.fill(prompts.DRAFT_OFFER, language, draft=draft.strip().rstrip("."))
            passages = f"{passages}\n\n{offer}" if passages else offer
        if task == "summarize":
            return prompts.fill(prompts.GENERATOR_SUMMARY, language, passages=passages, request=query)
        return self.answer_form.render(passages, query, language)

    def system(self, task: str, language: str) -> str | None:
        """The generator's system prompt: the pipeline's, except under a benchmark's answer form."""
        if task == "summarize":
            return prompts.fill(prompts.GENERATOR_SYSTEM, language)
        return self.answer_form.system(language)

    def max_new_tokens(self, task: str) -> int:
        return self.settings.summary_max_new_tokens if task == "summarize" else self.settings.answer_max_new_tokens

    def render_passages(self, evidence: Sequence[Evidence], language: str = "en") -> str:
        """The evidence as numbered passages, in the given order; a chunk that overlaps or touches
        the previous one of the same document is merged into its passage, so no text is repeated."""
        texts = {document.id: document.text for document in self.documents}
        merged: list[list] = []  # [doc_id, title, start, end]
        for item in evidence:
            last = merged[-1] if merged else None
            if (last is not None and last[0] == item.doc_id and item.start_char <= last[3] + 1
                    and item.end_char >= last[2] - 1):
                last[2], last[3] = min(last[2], item.start_char), max(last[3], item.end_char)
            else:
                merged.append([item.doc_id, item.title, item.start_char, item.end_char])
        return "\n\n".join(
            prompts.fill(prompts.PASSAGE, language, number=str(number), title=title or doc_id,
                         text=texts[doc_id][start:end])
            for number, (doc_id, title, start, end) in enumerate(merged, start=1)
        )

    def generate(self, query: str, evidence: Sequence[Evidence], task: str, language: str,
                 on_text: Callable[[str], None] | None = None, draft: str = "") -> str:
        """The generator's answer from the answer prompt over `evidence` (and `draft`, offered)."""
        if task == "summarize" and not query:
            query = prompts.fill(prompts.DEFAULT_SUMMARY_REQUEST, language)
        return self.generator.generate(self.prompt(query, task, language, evidence, draft),
                                       system=self.system(task, language),
                                       max_new_tokens=self.max_new_tokens(task), on_text=on_text)

    # -- the window -----------------------------------------------------------------------------
    def room_after(self, prompt: str, system: str | None, new_tokens: int) -> int | None:
        """Tokens of the generator's window that `prompt` (with `system`) and a reply of
        `new_tokens` leave (negative: they do not fit); None when the window is unknown."""
        window = self.generator.context_window
        if not window:
            return None
        return window - self.generator.count_tokens(prompt, system) - new_tokens

    def room_left(self, query: str, evidence: Sequence[Evidence], task: str, language: str,
                  draft: str = "") -> int | None:
        """What the answer prompt over `evidence` (and `draft`) and the answer leave of the window."""
        return self.room_after(self.prompt(query, task, language, evidence, draft), self.system(task, language),
                               self.max_new_tokens(task))

    def room_for_evidence(self, query: str, task: str, language: str) -> int | None:
        """Evidence tokens the window leaves after the prompt and the answer (None: the window is
        unknown); counted once per question and task. Raises `QueryTooLongError` when no evidence
        would fit, with the fixes that would make room."""
        key = (query, task, language)
        if key not in self._rooms:
            room = self.room_left(query, [], task, language)
            if room is not None:
                room = int(room * TOKENIZER_MARGIN)
                if room < 1:
                    self._too_long(query, task, language)
            self._rooms[key] = room
        return self._rooms[key]

    def _too_long(self, query: str, task: str, language: str) -> None:
        window = self.generator.context_window
        system = self.system(task, language)
        overhead = self.generator.count_tokens(self.prompt(query, task, language, []), system)
        answer = self.max_new_tokens(task)
        need = window - answer - int(1 / TOKENIZER_MARGIN) - 1  # most prompt tokens that leave room
        excess = overhead - need
        # the query's share of the prompt (it may appear more than once)
        query_tokens = overhead - self.generator.count_tokens(self.prompt("", task, language, []), system)
        fixes = []
        if 0 < excess < query_tokens:
            # characters per token vary: the estimate cuts a little more (10%, at least 4 tokens)
            chars = min(len(query), -(-(excess + max(4, excess // 10)) * len(query) // query_tokens))
            fixes.append(f"shorten the query by at least {excess} tokens (about {chars} characters)")
        elif excess > 0:
            fixes.append("use a generator with a larger window (even an empty query would not fit)")
        fitting_answer = window - overhead - int(1 / TOKENIZER_MARGIN) - 1
        if fitting_answer >= 1:
            fixes.append(f"answer in at most {fitting_answer} tokens (`--max-new-tokens {fitting_answer}`, or "
                         f"`--set {'summary' if task == 'summarize' else 'answer'}_max_new_tokens={fitting_answer}`)")
        raise QueryTooLongError(
            f"the generator's window ({window} tokens) leaves no room for evidence after the prompt ({overhead} "
            f"tokens, with the query) and the answer ({answer}); {' or '.join(fixes)}"
        )

    def budget(self, query: str, task: str, language: str, max_tokens: int | None = None) -> int:
        """Evidence tokens that fit: `max_tokens` (default `evidence_tokens`), capped by the room."""
        budget = max_tokens or self.settings.evidence_tokens
        room = self.room_for_evidence(query, task, language)
        return budget if room is None else min(budget, room)

    def fit_window(self, evidence: list[Evidence], query: str, task: str, language: str) -> list[Evidence]:
        """Drop the lowest-scored evidence until the whole prompt fits the generator's window."""
        while evidence:
            left = self.room_left(query, evidence, task, language)
            if left is None or left >= 0:
                break
            weakest = min(range(len(evidence)), key=lambda i: evidence[i].score)
            evidence = evidence[:weakest] + evidence[weakest + 1 :]
        return evidence

    # -- retrieval ------------------------------------------------------------------------------
    def retrieve(self, plan: RetrievalPlan) -> tuple[list[Hit], dict[int, list[FoundBy]]]:
        """Execute `plan`: every query retrieves its hits (`plan.hits_per_query`, default
        `hits_per_query`); the lists are combined into one ranking: fused (weighted), or with
        `plan.union` taken round-robin by rank (`hybrid.round_robin`; no weights). Returns the
        combined hits, best first, and for each chunk id the lists that fetched it, in query order
        (`FoundBy`: query index, text, rank, score)."""
        from memorag.retrieval.hybrid import fuse, round_robin

        if self.retriever is None:
            raise EmptyCorpusError("nothing is memorized yet")
        results = self.retriever.search(list(plan.queries), plan.hits_per_query or self.settings.hits_per_query)
        found_by: dict[int, list[FoundBy]] = {}
        for position, (text, hits) in enumerate(zip(plan.queries, results, strict=True)):
            for rank, hit in enumerate(hits, start=1):
                lists = found_by.setdefault(hit.chunk_id, [])
                if not any(item.query_index == position for item in lists):
                    lists.append(FoundBy(position, text, rank, round(float(hit.score), 6)))
        if plan.union:
            return round_robin(results), found_by
        return fuse(results, method=self.settings.fusion, weights=list(plan.weights)), found_by

    def gather(self, plan: RetrievalPlan, task: str, query: str, language: str, *,
               max_tokens: int | None = None) -> list[Evidence]:
        """Execute `plan` (`retrieve`), keep the best chunks within the budget
        (`budget(max_tokens)`), then fit the whole prompt to the window (`fit_window`)."""
        from memorag.retrieval.hybrid import fit_to_budget

        ranked, found_by = self.retrieve(plan)
        budget = self.budget(query, task, language, max_tokens)
        scores = {hit.chunk_id: hit.score for hit in ranked}
        kept = fit_to_budget(ranked, self.chunk_by_id, budget)
        evidence = [chunk_evidence(chunk, scores[chunk.id], found_by) for chunk in kept]
        return self.fit_window(evidence, query, task, language)

    def gather_whole(self, plan: RetrievalPlan, task: str, query: str, language: str, order: str,
                     draft: str = "") -> tuple[list[Evidence], list[str]]:
        """Execute `plan` (`retrieve`) and keep every chunk of its ranking (no evidence budget), in
        `order`; when the answer prompt over them (with `draft` offered) is longer than the
        generator's window, cut them one by one as `cut_clue_hits_first` says: the chunks clues
        alone found go first, the query's own hits last. Returns the evidence and a warning per
        kind of cut (none when all fit). Raises `QueryTooLongError` when the query leaves no room."""
        ranked, found_by = self.retrieve(plan)
        self.room_for_evidence(query, task, language)
        kept = [chunk_evidence(self.chunk_by_id[hit.chunk_id], hit.score, found_by) for hit in ranked]
        cut: list[Evidence] = []
        while kept:
            left = self.room_left(query, self.order(kept, order), task, language, draft)
            if left is None or left >= 0:
                break
            cut.append(kept.pop(cut_clue_hits_first(kept)))
        return self.order(kept, order), self._cut_warnings(cut)

    def _cut_warnings(self, cut: Sequence[Evidence]) -> list[str]:
        window = self.generator.context_window
        by_clues = [item for item in cut if 0 not in item.queries]
        own = [item for item in cut if 0 in item.queries]
        warnings = []
        if by_clues:
            warnings.append(f"the generator's window ({window} tokens) could not hold every retrieved chunk: "
                            f"{len(by_clues)} found by clues alone were left out "
                            f"({', '.join(item.citation for item in by_clues)})")
        if own:
            warnings.append(f"the generator's window ({window} tokens) could not hold the query's own hits: "
                            f"{len(own)} were left out ({', '.join(item.citation for item in own)}); a generator "
                            f"with a larger window, or a shorter `answer_max_new_tokens`, would keep them")
        return warnings

    def order(self, evidence: Sequence[Evidence], order: str) -> list[Evidence]:
        """`evidence` in document order (documents as memorized, then by offset) or best first
        (by score; ties keep their order)."""
        if order == "best-first":
            return sorted(evidence, key=lambda item: -item.score)
        if order != "document":
            raise PipelineError(f"evidence order {order!r}; choose document or best-first")
        rank = {document.id: number for number, document in enumerate(self.documents)}
        return sorted(evidence, key=lambda item: (rank.get(item.doc_id, len(rank)), item.start_char, item.end_char))
