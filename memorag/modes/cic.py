"""The `cic` mode: LOFT corpus-in-context, the whole corpus in the prompt, no retriever.

Tasks: `retrieval` (the reply names the documents that answer the query; `Answer.answer`
is their ids joined with ", ") and `qa` (the reply answers). In both, `Answer.extras["predicted_ids"]`
holds the document ids the reply names (retrieval: its final answer; qa: the documents
it lists before the answer), `Answer.evidence` every document in the prompt (whole, with
`chunk_id` NO_CHUNK, in prompt order), `Answer.extras["raw_reply"]` the reply itself, and
`Answer.warnings` what was cut or could not be read (see `cic_answer.py`).

Few-shot examples (`cic.examples` of them): the task's labelled questions when the caller set
`MemoRAG.few_shot` (as LOFT: real questions of the same task with their gold documents, which
join the prompt's corpus when it lacks them), otherwise examples generated from the corpus
(`cic_prompt.build_examples`).

Window policy: when the prompt does not fit the generator's window (less the answer's
tokens), documents are kept whole, in corpus order, while they fit; the next one is cut
at the end (at a word boundary) to the room left, if at least `MIN_CUT_TOKENS` are left
(a corpus of one long document, like a per-question context, is read up to the window);
the rest are dropped. Generated few-shot examples are drawn from the kept documents only, and a
warning is logged and put in `Answer.warnings`. If not even `MIN_CUT_TOKENS` of the first
document fit, it is an error. A generator whose window is unknown (an endpoint without
`generator_window`) is sent the whole corpus.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from memorag.config import ConfigError
from memorag.errors import PipelineError
from memorag.modes import cic_prompt
from memorag.modes.base import Mode, register_mode
from memorag.modes.cic_answer import parse_reply
from memorag.modes.context import ModeContext
from memorag.modes.results import NO_CHUNK, Answer, AskHooks, cited_evidence, timed
from memorag.retrieval.chunking import Document

logger = logging.getLogger(__name__)

MIN_CUT_TOKENS = 64  # least room worth giving a cut document


@dataclass
class CiCSettings:
    """The cic mode's settings (`--set cic.examples=...`): the whole corpus in the prompt."""

    examples: int = 2  # few-shot examples built from the corpus itself (0: none)
    seed: int = 0  # picks the examples' documents and sentences

    def __post_init__(self) -> None:
        if self.examples < 0:
            raise ConfigError(f"cic.examples={self.examples} must be 0 or more")


@register_mode
class CiCMode(Mode):
    """The corpus, few-shot examples grounded in it, then the query, in one prompt; the prefix
    before the query is the same for every query, so a local generator computes it once."""

    name = "cic"
    description = "no retrieval: the corpus, examples grounded in it and the question in one prompt"
    tasks = ("retrieval", "qa")
    default_task = "retrieval"
    own_evidence_order = None  # reads the corpus itself, nothing ranked
    uses_answer_prompt = False  # LOFT's corpus-in-context prompt
    settings_key = "cic"

    @classmethod
    def score_meaning(cls, config: Any) -> str:
        return "none (always 0): this mode reads the corpus itself, nothing is ranked"

    def __init__(self, evidence_order: str = "own"):
        super().__init__(evidence_order)
        self._prefixes: dict[tuple[int, int | None, str, str], str] = {}
        self._document_tokens: list[int] | None = None

    def prepare(self, context: ModeContext) -> None:
        self._prefixes.clear()
        self._document_tokens = None

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        ctx = context
        language = context.language_of(query)
        timings: dict[str, float] = {}
        warnings: list[str] = []
        suffix = cic_prompt.query_suffix(query, task)
        with timed(timings, "prompt"):
            count, cut, prefix = self._fit(ctx, suffix, task, language, warnings)
        documents = self.documents(ctx, count, cut)
        whole = {document.id: tokens for document, tokens in zip(ctx.documents[:count], self.document_tokens(ctx))}
        evidence = [cited_evidence(NO_CHUNK, document, 0, len(document.text),
                                   whole[document.id] if document.id in whole else self._tokens(ctx, document), 0.0,
                                   [], document.text) for document in documents]
        hooks.evidence(evidence)
        with timed(timings, "generate"):
            reply = ctx.generator.generate_with_prefix(prefix, suffix, max_new_tokens=ctx.shared.answer_max_new_tokens,
                                                       on_text=hooks.on_text)
        parsed = parse_reply(reply, task, len(documents))
        for note in parsed.notes:
            logger.info("cic: %s", note)
        warnings += parsed.notes
        predicted = [documents[number].id for number in parsed.numbers]
        text = ", ".join(predicted) if task == "retrieval" else parsed.answer
        return Answer(query, task, self.name, text, [], evidence, timings, ctx.generator.name,
                      warnings=warnings, extras={"predicted_ids": predicted, "raw_reply": reply})

    def documents(self, ctx: ModeContext, count: int, cut: int | None = None) -> list[Document]:
        """The documents of the prompt: the first `count` of the corpus, the next one's first `cut`
        characters when `cut` is set, and the few-shot examples' gold documents the corpus lacks
        (`cic_prompt.place_documents`)."""
        documents = list(ctx.documents[:count])
        if cut is not None:
            document = ctx.documents[count]
            documents.append(dataclasses.replace(document, text=document.text[:cut]))
        return cic_prompt.place_documents(documents, self._few_shot(ctx), ctx.settings.seed)

    def _few_shot(self, ctx: ModeContext) -> list:
        return ctx.few_shot[: ctx.settings.examples]

    def prefix(self, ctx: ModeContext, count: int, task: str, language: str, cut: int | None = None) -> str:
        """The shared part of the prompt over `documents(count, cut)`."""
        key = (count, cut, task, language, tuple(example.query for example in self._few_shot(ctx)))
        if key not in self._prefixes:
            self._prefixes[key] = self._build_prefix(ctx, self.documents(ctx, count, cut), task, language)
        return self._prefixes[key]

    def _build_prefix(self, ctx: ModeContext, documents: list[Document], task: str, language: str) -> str:
        """The prefix over the prompt's `documents`: labelled examples where the task has them (as
        LOFT), else examples generated from the corpus."""
        settings = ctx.settings
        if ctx.few_shot:
            examples = cic_prompt.labelled_examples(self._few_shot(ctx), documents, settings.examples)
        else:
            examples = cic_prompt.build_examples(documents, settings.examples, settings.seed, language)
        return cic_prompt.corpus_prefix(documents, task, language, examples)

    def _tokens(self, ctx: ModeContext, document: Document) -> int:
        generator = ctx.generator
        return generator.count_tokens(cic_prompt.render_document(0, document)) - generator.count_tokens("")

    def document_tokens(self, ctx: ModeContext) -> list[int]:
        """Each document's tokens in the prompt (its tagged line, in the generator's tokens)."""
        if self._document_tokens is None:
            generator = ctx.generator
            empty = generator.count_tokens("")
            self._document_tokens = [generator.count_tokens(cic_prompt.render_document(number, document)) - empty
                                     for number, document in enumerate(ctx.documents)]
        return self._document_tokens

    def _room(self, ctx: ModeContext, prompt: str) -> int | None:
        """What `prompt` and the answer leave of the generator's window (`EvidenceStep.room_after`,
        the one place that sum is made); negative when they do not fit, None when the window is unknown."""
        return ctx.evidence.room_after(prompt, None, ctx.shared.answer_max_new_tokens)

    def _fit(self, ctx: ModeContext, suffix: str, task: str, language: str, warnings: list[str]) -> tuple[int, int | None, str]:
        """How many whole documents (from the first) the prompt holds, how many characters of
        the next one (None: none), and its prefix; see the module."""
        total = len(ctx.documents)
        count = total
        prefix = self.prefix(ctx, count, task, language)
        room = self._room(ctx, prefix + suffix)
        if room is None:
            return count, None, prefix
        first_room = room
        while room < 0:
            if count == 1:
                count = 0
                break
            tokens = self.document_tokens(ctx)
            freed = 0
            while count > 1 and (freed < -room or freed == 0):  # drop at least one
                count -= 1
                freed += tokens[count]
            prefix = self.prefix(ctx, count, task, language)
            room = self._room(ctx, prefix + suffix)
        # the estimate ignores that fewer documents also give shorter examples: add back while they fit
        while count < total and self._room(ctx, self.prefix(ctx, count + 1, task, language) + suffix) >= 0:
            count += 1
        cut = None
        if count < total:
            cut = self._cut(ctx, count, suffix, task, language)
            window, answer = ctx.generator.context_window, ctx.shared.answer_max_new_tokens
            if count == 0 and cut is None:
                raise PipelineError(
                    f"cic: not even {MIN_CUT_TOKENS} tokens of the first document fit the generator's window "
                    f"({window} tokens, {answer} of them for the answer) beside the "
                    "instruction, examples and query; use a generator with a larger window (generator_window), "
                    "fewer examples (cic.examples), or a retrieval mode such as ctx"
                )
            dropped = [document.id for document in ctx.documents[count + (cut is not None):]]
            kept = f"kept the first {count} of {total} documents in corpus order"
            if cut is not None:
                document = ctx.documents[count]
                kept += f", the first {cut} of {len(document.text)} characters of {document.id}"
            limit = window - answer  # what the window leaves for the prompt, as the message says
            message = (
                f"cic: the corpus prompt has {limit - first_room} tokens but the generator's window leaves {limit} "
                f"({window} less {answer} for the answer); {kept}"
            )
            if dropped:
                message += (f" and dropped the last {len(dropped)}: {', '.join(dropped[:5])}"
                            f"{', ...' if len(dropped) > 5 else ''}")
            logger.warning(message)
            warnings.append(message)
        return count, cut, self.prefix(ctx, count, task, language, cut)

    def _cut(self, ctx: ModeContext, count: int, suffix: str, task: str, language: str) -> int | None:
        """The most characters of document `count` (ending at a word boundary) that fit beside the
        first `count` documents, or None when fewer than `MIN_CUT_TOKENS` tokens would."""
        if self._room(ctx, self.prefix(ctx, count, task, language) + suffix) < MIN_CUT_TOKENS:
            return None
        text = ctx.documents[count].text

        def fits(length: int) -> bool:
            prefix = self._build_prefix(ctx, self.documents(ctx, count, length), task, language)
            return self._room(ctx, prefix + suffix) >= 0

        low, high = 0, len(text)  # fits(low); the answer is the largest length that fits
        while low < high:
            middle = (low + high + 1) // 2
            if fits(middle):
                low = middle
            else:
                high = middle - 1
        boundary = text.rfind(" ", 0, low + 1) if low < len(text) else low
        cut = boundary if boundary > 0 else low
        if cut == 0 or self._tokens(ctx, dataclasses.replace(ctx.documents[count], text=text[:cut])) < MIN_CUT_TOKENS:
            return None
        return cut
