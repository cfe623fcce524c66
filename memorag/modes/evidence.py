"""The evidence step every mode shares: retrieve, gather, fit the window, render the prompt once.

One `EvidenceStep` serves one question (the pipeline makes it for each `ask`). The
generator's room is counted in one place: its window less a prompt (counted in the
generator's own tokens) less the tokens kept for the reply (`room_after` for a prompt of a
mode's own, `room_in` for a measured answer prompt). Everything else asks it:

- `room_for_evidence` is what the answer prompt without evidence leaves (counted once per
  question and task), kept at `TOKENIZER_MARGIN` because chunks are counted in the memory
  model's tokenizer; it raises `QueryTooLongError` when nothing would fit;
- `budget` is the evidence budget (`evidence_tokens`, or a mode's own) capped by that room;
- `fit` renders the answer prompt over the evidence, in the order the generator reads it,
  once, has the generator measure it once (`Generator.measure`: its token ids and their
  offsets), and cuts evidence against that count: each cut's tokens are read from the token
  offsets of its passage, not by rendering again. Only when cuts were made is the shorter
  prompt rendered and measured (once per round of cuts; a round that estimated too few cuts
  is followed by another). The `AnswerPrompt` it returns is what `generate` sends: the token
  ids of a local model, the same text to an endpoint, so the prompt measured is the prompt sent;
- `room_left` is what a prompt over given evidence leaves (`room_in` for a prompt already
  measured: the full mode cuts the corpus to it);
- the cic mode, which writes its own prompt, fits its corpus with `room_after` itself.

`retrieve` executes a retrieval plan (`memorag.modes.evidence_plan`: every query retrieves,
the lists are fused by weight or unioned round-robin by rank), noting for each chunk every
list that fetched it (`FoundBy`: the query's text, the rank, the retriever's score); `gather` is
that ranking fitted to a budget (the best chunks that fit are kept); `gather_whole` keeps the
whole ranking (the reference rule: no budget). `fit_ranked` puts a ranking in document order
or best first (`order`) and fits it: the lowest-scored evidence is cut first
(`weakest_first`), or for a ranking read whole the chunks clues alone found first
(`clue_hits_first`). The answer prompt offers the memory's draft answer after the passages,
when there is one ("The answer might be ...").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memorag.errors import EmptyCorpusError, PipelineError, QueryTooLongError
from memorag.modes.evidence_plan import RetrievalPlan
from memorag.modes.results import Evidence, FoundBy
from memorag.prompting import prompts
from memorag.prompting.answer_forms import AnswerForm
from memorag.retrieval.base import Hit, Retriever
from memorag.retrieval.chunking import Chunk, Document

if TYPE_CHECKING:
    from memorag.generation.base import Generator, PromptTokens

# Chunks are counted with the memory model's tokenizer, the generator's window with its own:
# evidence budgets keep this share of the room the window leaves.
TOKENIZER_MARGIN = 0.9
PASSAGE_SEPARATOR = "\n\n"


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


def clue_hits_first(ranking: Sequence[Evidence]) -> list[int]:
    """The order in which items of `ranking` (best first) are cut when it does not fit: each time
    the one `cut_clue_hits_first` names among those left."""
    left = list(range(len(ranking)))
    order = []
    while left:
        order.append(left.pop(cut_clue_hits_first([ranking[index] for index in left])))
    return order


def weakest_first(ranking: Sequence[Evidence]) -> list[int]:
    """The order in which items of `ranking` are cut when it does not fit: the lowest score first
    (ties: the earlier in the ranking first)."""
    return sorted(range(len(ranking)), key=lambda index: ranking[index].score)


@dataclass(frozen=True)
class Passage:
    """One numbered passage of a rendered answer prompt: its characters `start`..`end`-1 in the
    prompt, where its document's text begins there (`text_start`, the document's character
    `doc_start`), and the positions of the evidence it shows (`members`: several when chunks of
    one document overlap or touch)."""

    start: int
    end: int
    text_start: int
    doc_start: int
    members: tuple[int, ...]

    def shifted(self, offset: int) -> Passage:
        return Passage(self.start + offset, self.end + offset, self.text_start + offset, self.doc_start, self.members)


@dataclass(frozen=True)
class AnswerPrompt:
    """The answer prompt over `evidence` (in the order shown), rendered and measured once: the text
    and token ids the generator gets (`tokens`), where each passage stands in it (`passages`),
    and the reply's length."""

    evidence: list[Evidence]
    passages: tuple[Passage, ...]
    tokens: PromptTokens
    max_new_tokens: int

    @property
    def text(self) -> str:
        return self.tokens.prompt


def _uncovered(span: tuple[int, int], others: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of `span` that none of `others` covers (half-open character ranges)."""
    pieces = [span]
    for first, last in others:
        pieces = [piece for start, end in pieces for piece in ((start, min(end, first)), (max(start, last), end))
                  if piece[1] > piece[0]]
    return pieces


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
        self._texts: dict[str, str] | None = None

    @property
    def generator(self) -> Generator:
        return self._generator()

    # -- the answer prompt ----------------------------------------------------------------------
    def render(self, query: str, task: str, language: str, evidence: Sequence[Evidence],
               draft: str = "") -> tuple[str, tuple[Passage, ...]]:
        """The answer prompt over `evidence` and where its passages stand in it; a `draft` answer is
        offered after the passages, as the reference pipeline offers its memory's ("The answer might
        be ...", `prompts.DRAFT_OFFER`). A summary with no request asks for the default one."""
        passages, layout = self._passages(evidence, language)
        body = passages
        if draft:
            offer = prompts.fill(prompts.DRAFT_OFFER, language, draft=draft.strip().rstrip("."))
            body = f"{passages}\n\n{offer}" if passages else offer
        if task == "summarize":
            request = query or prompts.fill(prompts.DEFAULT_SUMMARY_REQUEST, language)
            text = prompts.fill(prompts.GENERATOR_SUMMARY, language, passages=body, request=request)
        else:
            text = self.answer_form.render(body, query, language)
        offset = text.find(passages) if passages else 0
        return text, tuple(passage.shifted(offset) for passage in layout)

    def prompt(self, query: str, task: str, language: str, evidence: Sequence[Evidence], draft: str = "") -> str:
        """The answer prompt's text (`render`)."""
        return self.render(query, task, language, evidence, draft)[0]

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
        return self._passages(evidence, language)[0]

    def _passages(self, evidence: Sequence[Evidence], language: str) -> tuple[str, list[Passage]]:
        merged: list[list] = []  # [doc_id, title, start, end, member positions]
        for position, item in enumerate(evidence):
            last = merged[-1] if merged else None
            if (last is not None and last[0] == item.doc_id and item.start_char <= last[3] + 1
                    and item.end_char >= last[2] - 1):
                last[2], last[3] = min(last[2], item.start_char), max(last[3], item.end_char)
                last[4].append(position)
            else:
                merged.append([item.doc_id, item.title, item.start_char, item.end_char, [position]])
        texts, pieces, layout, start = self.document_texts, [], [], 0
        for number, (doc_id, title, first, last, members) in enumerate(merged, start=1):
            text = texts[doc_id][first:last]
            piece = prompts.fill(prompts.PASSAGE, language, number=str(number), title=title or doc_id, text=text)
            # the passage's text ends it (`prompts.PASSAGE`): it begins len(text) before the end
            layout.append(Passage(start, start + len(piece), start + len(piece) - len(text), first, tuple(members)))
            pieces.append(piece)
            start += len(piece) + len(PASSAGE_SEPARATOR)
        return PASSAGE_SEPARATOR.join(pieces), layout

    @property
    def document_texts(self) -> Mapping[str, str]:
        """Each document's text by id (built once per step)."""
        if self._texts is None:
            self._texts = {document.id: document.text for document in self.documents}
        return self._texts

    def measure(self, query: str, task: str, language: str, evidence: Sequence[Evidence],
                draft: str = "") -> AnswerPrompt:
        """The answer prompt over `evidence` (in this order), rendered once and measured once by the
        generator (`Generator.measure`)."""
        text, passages = self.render(query, task, language, evidence, draft)
        tokens = self.generator.measure(text, self.system(task, language))
        return AnswerPrompt(list(evidence), passages, tokens, self.max_new_tokens(task))

    def generate(self, prompt: AnswerPrompt, on_text: Callable[[str], None] | None = None) -> str:
        """The generator's answer to a measured answer prompt: the same prompt, never rendered again."""
        return self.generator.generate_measured(prompt.tokens, max_new_tokens=prompt.max_new_tokens, on_text=on_text)

    # -- the window -----------------------------------------------------------------------------
    def room_after(self, prompt: str, system: str | None, new_tokens: int) -> int | None:
        """Tokens of the generator's window that `prompt` (with `system`) and a reply of
        `new_tokens` leave (negative: they do not fit); None when the window is unknown."""
        window = self.generator.context_window
        if not window:
            return None
        return window - self.generator.count_tokens(prompt, system) - new_tokens

    def room_in(self, prompt: AnswerPrompt) -> int | None:
        """What a measured answer prompt and its reply leave of the window (None: unknown)."""
        window = self.generator.context_window
        return window - prompt.tokens.count - prompt.max_new_tokens if window else None

    def room_left(self, query: str, evidence: Sequence[Evidence], task: str, language: str,
                  draft: str = "") -> int | None:
        """What the answer prompt over `evidence` (and `draft`) and the answer leave of the window."""
        if not self.generator.context_window:
            return None
        return self.room_in(self.measure(query, task, language, evidence, draft))

    def room_without_evidence(self, query: str, task: str, language: str) -> int | None:
        """What the answer prompt without evidence and the answer leave of the window (None: the
        window is unknown); measured once per question and task."""
        key = (query, task, language)
        if key not in self._rooms:
            self._rooms[key] = self.room_left(query, [], task, language)
        return self._rooms[key]

    def room_for_evidence(self, query: str, task: str, language: str) -> int | None:
        """Evidence tokens the window leaves after the prompt and the answer (None: the window is
        unknown), at `TOKENIZER_MARGIN`. Raises `QueryTooLongError` when no evidence would fit,
        with the fixes that would make room."""
        room = self.room_without_evidence(query, task, language)
        if room is None:
            return None
        if int(room * TOKENIZER_MARGIN) < 1:
            self._too_long(query, task, language, room)
        return int(room * TOKENIZER_MARGIN)

    def _too_long(self, query: str, task: str, language: str, room: int) -> None:
        """Raise `QueryTooLongError` for a prompt and answer that leave `room` tokens of the window
        (before the margin), with the fixes that would leave at least one token after it."""
        window = self.generator.context_window
        answer = self.max_new_tokens(task)
        overhead = window - answer - room  # the prompt's tokens, with the query
        need = window - answer - int(1 / TOKENIZER_MARGIN) - 1  # most prompt tokens that leave room
        excess = overhead - need
        # the query's share of the prompt (it may appear more than once)
        query_tokens = overhead - self.generator.count_tokens(self.prompt("", task, language, []),
                                                              self.system(task, language))
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

    def fit(self, query: str, task: str, language: str, evidence: Sequence[Evidence], cut_order: Sequence[int],
            draft: str = "") -> AnswerPrompt:
        """The answer prompt over `evidence` (in the order the generator reads it) that fits the
        window: measured once, then, while too long, the items `cut_order` names (positions in
        `evidence`) are cut in turn until their tokens, read from the measured prompt's token
        offsets, cover the excess, and the shorter prompt is measured again."""
        prompt = self.measure(query, task, language, evidence, draft)
        kept = list(range(len(evidence)))  # positions in `evidence` of the prompt's evidence
        cuts = iter(cut_order)
        while kept and (left := self.room_in(prompt)) is not None and left < 0:
            excess, dropped = -left, set()
            for position in cuts:
                excess -= self._cut_saves(prompt, kept.index(position), dropped)
                dropped.add(kept.index(position))
                if excess <= 0:
                    break
            if not dropped:  # `cut_order` names nothing more to cut
                break
            kept = [position for index, position in enumerate(kept) if index not in dropped]
            prompt = self.measure(query, task, language, [evidence[position] for position in kept], draft)
        return prompt

    def _cut_saves(self, prompt: AnswerPrompt, index: int, dropped: set[int]) -> int:
        """The tokens cutting item `index` of the prompt's evidence would save, `dropped` already cut:
        its passage, separator included, when nothing else of it is left, else the characters of the
        passage only it shows (the tokens overlapping them, so rather more than fewer)."""
        passage = next(passage for passage in prompt.passages if index in passage.members)
        others = [member for member in passage.members if member != index and member not in dropped]
        if not others:
            start, end = passage.start, passage.end
            return self.generator.tokens_within(prompt.tokens, max(0, start - len(PASSAGE_SEPARATOR)), end)

        def span(member: int) -> tuple[int, int]:
            item = prompt.evidence[member]
            return (passage.text_start + item.start_char - passage.doc_start,
                    passage.text_start + item.end_char - passage.doc_start)

        return sum(self.generator.tokens_within(prompt.tokens, start, end)
                   for start, end in _uncovered(span(index), [span(member) for member in others]))

    # -- retrieval ------------------------------------------------------------------------------
    def retrieve(self, plan: RetrievalPlan) -> tuple[list[Hit], dict[int, list[FoundBy]]]:
        """Execute `plan`: every query retrieves its hits (`plan.hits_per_query`, default
        `hits_per_query`; the first, the user's own, `plan.query_hits` when that is more); the lists are combined into one ranking: fused (weighted), or with
        `plan.union` taken round-robin by rank (`hybrid.round_robin`; no weights). Returns the
        combined hits, best first, and for each chunk id the lists that fetched it, in query order
        (`FoundBy`: query index, text, rank, score)."""
        from memorag.retrieval.hybrid import fuse, round_robin

        if self.retriever is None:
            raise EmptyCorpusError("nothing is memorized yet")
        depth = plan.hits_per_query or self.settings.hits_per_query
        own = max(plan.query_hits or depth, depth)  # the user's query may retrieve deeper than its clues
        results = self.retriever.search(list(plan.queries), own)
        results = [hits[:own] if position == 0 else hits[:depth] for position, hits in enumerate(results)]
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
        """Execute `plan` (`retrieve`) and keep the best chunks within the budget
        (`budget(max_tokens)`), best first (`fit_ranked` fits them to the window)."""
        from memorag.retrieval.hybrid import fit_to_budget

        ranked, found_by = self.retrieve(plan)
        budget = self.budget(query, task, language, max_tokens)
        scores = {hit.chunk_id: hit.score for hit in ranked}
        kept = fit_to_budget(ranked, self.chunk_by_id, budget)
        return [chunk_evidence(chunk, scores[chunk.id], found_by) for chunk in kept]

    def gather_whole(self, plan: RetrievalPlan, task: str, query: str, language: str) -> list[Evidence]:
        """Execute `plan` (`retrieve`) and keep every chunk of its ranking (no evidence budget), best
        first; `fit_ranked` with `clue_hits_first` cuts them to the window: the chunks clues alone
        found go first, the query's own hits last. Raises `QueryTooLongError` when the query leaves
        no room."""
        ranked, found_by = self.retrieve(plan)
        self.room_for_evidence(query, task, language)
        return [chunk_evidence(self.chunk_by_id[hit.chunk_id], hit.score, found_by) for hit in ranked]

    def fit_ranked(self, ranking: Sequence[Evidence], order: str, query: str, task: str, language: str, *,
                   cut_order: Callable[[Sequence[Evidence]], list[int]] = weakest_first,
                   draft: str = "") -> AnswerPrompt:
        """The answer prompt over `ranking` (best first) put in `order` (`order`), with `draft`
        offered, fitted to the window (`fit`): items are cut in the order `cut_order` gives for the
        ranking (`weakest_first`, `clue_hits_first`)."""
        ordered = self.order(ranking, order)
        position = {id(item): index for index, item in enumerate(ordered)}
        cuts = [position[id(ranking[index])] for index in cut_order(ranking)]
        return self.fit(query, task, language, ordered, cuts, draft)

    def cut_warnings(self, ranking: Sequence[Evidence], kept: Sequence[Evidence]) -> list[str]:
        """A warning per kind of item of `ranking` that the window left out of `kept` (none when all
        fit): those clues alone found, and the query's own hits."""
        window = self.generator.context_window
        shown = {id(item) for item in kept}
        cut = [ranking[index] for index in clue_hits_first(ranking) if id(ranking[index]) not in shown]
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
