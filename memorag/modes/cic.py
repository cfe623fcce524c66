"""The `cic` mode: LOFT corpus-in-context, the whole corpus in the prompt, no retriever.

Tasks: `retrieval` (the reply names the documents that answer the query; `Answer.answer`
is their ids joined with ", ") and `qa` (the reply answers). In both, `Answer.predicted_ids`
holds the document ids the reply names (retrieval: its final answer; qa: the documents
it lists before the answer), `Answer.evidence` every document in the prompt (whole, with
`chunk_id` -1, in corpus order), `Answer.raw_reply` the reply itself, and
`Answer.warnings` what was cut or could not be read (see `cic_answer.py`).

Window policy: when the prompt does not fit the generator's window (less the answer's
tokens), documents are kept whole, in corpus order, while they fit; the rest are
dropped, the few-shot examples are drawn from the kept ones only, and a warning is
logged and put in `Answer.warnings`. If not even the first document fits, it is an
error. A generator whose window is unknown (an endpoint without `generator_window`) is
sent the whole corpus.
"""

from __future__ import annotations

import logging

from memorag.modes import cic_prompt
from memorag.modes.base import Mode, register_mode
from memorag.modes.cic_answer import parse_reply
from memorag.pipeline.types import Answer, AskHooks, Corpus, Evidence, PipelineError, timed

logger = logging.getLogger(__name__)


@register_mode
class CiCMode(Mode):
    """The corpus, few-shot examples grounded in it, then the query, in one prompt; the prefix
    before the query is the same for every query, so a local generator computes it once."""

    name = "cic"
    tasks = ("retrieval", "qa")
    default_task = "retrieval"

    def __init__(self, pipeline):
        super().__init__(pipeline)
        self._prefixes: dict[tuple[int, str, str], str] = {}
        self._document_tokens: list[int] | None = None

    def prepare(self, corpus: Corpus) -> None:
        self._prefixes.clear()
        self._document_tokens = None

    def answer(self, query: str, task: str, hooks: AskHooks) -> Answer:
        rag = self.pipeline
        language = rag.language_of(query)
        timings: dict[str, float] = {}
        warnings: list[str] = []
        suffix = cic_prompt.query_suffix(query, language)
        with timed(timings, "prompt"):
            count, prefix = self._fit(suffix, task, language, warnings)
        documents = rag.documents[:count]
        tokens = self.document_tokens()
        evidence = [Evidence(-1, document.id, document.title, 0, len(document.text), tokens[number], 0.0, [],
                             document.text) for number, document in enumerate(documents)]
        hooks.evidence(evidence)
        with timed(timings, "generate"):
            reply = rag.generator.generate_with_prefix(prefix, suffix, max_new_tokens=rag.config.answer_max_new_tokens,
                                                       on_text=hooks.on_text)
        parsed = parse_reply(reply, task, count)
        for note in parsed.notes:
            logger.info("cic: %s", note)
        warnings += parsed.notes
        predicted = [documents[number].id for number in parsed.numbers]
        text = ", ".join(predicted) if task == "retrieval" else parsed.answer
        return Answer(query, task, self.name, text, [], evidence, timings, rag.generator.name,
                      predicted_ids=predicted, warnings=warnings, raw_reply=reply)

    def prefix(self, count: int, task: str, language: str) -> str:
        """The shared part of the prompt over the first `count` documents."""
        key = (count, task, language)
        if key not in self._prefixes:
            documents = self.pipeline.documents[:count]
            config = self.pipeline.config
            examples = cic_prompt.build_examples(documents, config.cic_examples, config.cic_seed, language)
            self._prefixes[key] = cic_prompt.corpus_prefix(documents, task, language, examples)
        return self._prefixes[key]

    def document_tokens(self) -> list[int]:
        """Each document's tokens in the prompt (its tagged line, in the generator's tokens)."""
        if self._document_tokens is None:
            generator = self.pipeline.generator
            empty = generator.count_tokens("")
            self._document_tokens = [generator.count_tokens(cic_prompt.render_document(number, document)) - empty
                                     for number, document in enumerate(self.pipeline.documents)]
        return self._document_tokens

    def _fit(self, suffix: str, task: str, language: str, warnings: list[str]) -> tuple[int, str]:
        """How many documents (from the first) the prompt holds, and its prefix; see the module."""
        rag = self.pipeline
        total = len(rag.documents)
        count = total
        prefix = self.prefix(count, task, language)
        window = rag.generator.context_window
        if not window:
            return count, prefix
        limit = window - rag.config.answer_max_new_tokens
        used = first_used = rag.generator.count_tokens(prefix + suffix)
        while used > limit:
            if count == 1:
                raise PipelineError(
                    f"cic: not even the first document fits the generator's window ({window} tokens, "
                    f"{rag.config.answer_max_new_tokens} of them for the answer) beside the instruction, "
                    "examples and query; use a generator with a larger window (generator_window), fewer "
                    "examples (cic_examples), or a retrieval mode such as rag"
                )
            tokens = self.document_tokens()
            freed = 0
            while count > 1 and (freed < used - limit or freed == 0):  # drop at least one
                count -= 1
                freed += tokens[count]
            prefix = self.prefix(count, task, language)
            used = rag.generator.count_tokens(prefix + suffix)
        # the estimate ignores that fewer documents also give shorter examples: add back while they fit
        while count < total and rag.generator.count_tokens(self.prefix(count + 1, task, language) + suffix) <= limit:
            count += 1
            prefix = self.prefix(count, task, language)
        if count < total:
            dropped = [document.id for document in rag.documents[count:]]
            message = (
                f"cic: the corpus prompt has {first_used} tokens but the generator's window leaves {limit} "
                f"({window} less {rag.config.answer_max_new_tokens} for the answer); kept the first {count} of "
                f"{total} documents in corpus order and dropped the last {total - count}: "
                f"{', '.join(dropped[:5])}{', ...' if len(dropped) > 5 else ''}"
            )
            logger.warning(message)
            warnings.append(message)
        return count, prefix
