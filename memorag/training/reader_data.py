"""Reader training data: the pipeline's own answer prompts over its own evidence, from rows we may tune on.

Questions come only from the tuning splits: HotpotQA dev rows 0..4,999
(`hotpotqa_long_context(split="train")`: questions and distractor paragraphs of those rows) and
the SQuAD v2 dev articles of the first half of the file (`squad_long_context(split="train")`,
answerable and unanswerable questions alike).

Evidence is what the harness's pipeline gives its generator: each question's long context
(its gold paragraphs among distractors at `context_tokens`, as the harness builds its tasks)
is memorized as one document by a `MemoRAG` with the given settings (chunks, dense index), and
the rag mode asks the question under the task's benchmark answer form. Retrieval, the evidence
budget, the cuts to the window, the citations and the order are the pipeline's; the generator
(`PromptRecorder`) keeps the measured prompt instead of answering. Per question the order is
`best-first` (the rag mode's own) or `document` (the memorag mode's own, and the harness's
cpu-hour setting), alternating, so the reader sees both.

Targets are what the benchmarks score, a short span: the answer when the evidence holds it, else
`NO_ANSWER_REPLY`. HotpotQA: a bridge question's answer must appear in the passages; a comparison
or yes/no question needs every supporting sentence there too (its answer may stand in the
question). SQuAD: one of its answers appears; an unanswerable question always gets the reply.

Twins (`twins=True`): for each sample whose target is the answer, a second sample of the same question,
form and order, asked over the same context with every paragraph that holds the answer or a supporting
sentence taken out (`without_answer`), so the evidence the pipeline retrieves cannot hold it and the target is
the fixed reply. The two differ only in their evidence: whether to reply with the span or the fixed reply
can then be learned from the evidence alone, not from the kind of question.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memorag.evaluation.datasets.hotpotqa import hotpotqa_long_context
from memorag.evaluation.datasets.squad import squad_long_context
from memorag.evaluation.recall import CONTEXT_DOC_ID
from memorag.generation.base import Generator, PromptTokens, WrappedGenerator
from memorag.pipeline import MemoRAG
from memorag.pipeline.types import PipelineConfig
from memorag.prompting.answer_check import NO_ANSWER_REPLY
from memorag.prompting.answer_forms import as_answer_form
from memorag.prompting.clues import normalize
from memorag.retrieval.chunking import Document

ORDERS = ("best-first", "document")
FORMS = ("benchmark", "sentence")  # the task's benchmark answer prompt, or the CLI's (`AnswerForm()`)
SOURCES = ("hotpotqa", "squad")
MODE = "rag"


class PromptRecorder(WrappedGenerator):
    """A generator that writes nothing: it measures prompts as `inner` does and keeps the last one
    the pipeline sends (`last`)."""

    def __init__(self, inner: Generator):
        super().__init__(inner)
        self.last: PromptTokens | None = None

    def generate(self, prompt: str, *, system: str | None = None, max_new_tokens: int = 256,
                 on_text: Callable[[str], None] | None = None) -> str:
        self.last = self.inner.measure(prompt, system)
        return ""

    def generate_measured(self, measured: PromptTokens, *, max_new_tokens: int = 256,
                          on_text: Callable[[str], None] | None = None) -> str:
        self.last = measured
        return ""

    def count_tokens(self, prompt: str, system: str | None = None) -> int:
        return self.inner.count_tokens(prompt, system)

    def measure(self, prompt: str, system: str | None = None) -> PromptTokens:
        return self.inner.measure(prompt, system)


def _contains(haystack: str, needle: str) -> bool:
    needle = normalize(needle)
    return bool(needle) and f" {needle} " in f" {haystack} "


def reader_target(example: Any, evidence_text: str) -> tuple[str, str]:
    """The reply the reader should write over `evidence_text` for `example` (an `EvalExample` of the
    hotpotqa or squad builders), and why: `answer`, `not in evidence` or `unanswerable`."""
    seen = normalize(evidence_text)
    if example.meta.get("is_impossible"):
        return NO_ANSWER_REPLY, "unanswerable"
    if not example.answers:
        return NO_ANSWER_REPLY, "unanswerable"
    answer = example.answers[0]
    if example.task.startswith("hotpotqa"):
        needs_support = example.meta.get("type") == "comparison" or normalize(answer) in ("yes", "no")
        support = [item["text"] for item in example.gold_evidence if item.get("kind") == "sentence"]
        if needs_support and not all(_contains(seen, sentence) for sentence in support):
            return NO_ANSWER_REPLY, "not in evidence"
        if not needs_support and not _contains(seen, answer):
            return NO_ANSWER_REPLY, "not in evidence"
        return answer, "answer"
    found = [text for text in example.answers if _contains(seen, text)]
    return (found[0], "answer") if found else (NO_ANSWER_REPLY, "not in evidence")


def without_answer(example: Any) -> Any:
    """`example` with every blank-line-separated paragraph of its context that holds one of its answers or
    one of its supporting sentences taken out (a yes/no answer is matched through its supporting sentences
    only); `None` where no paragraph was taken out or none is left."""
    answers = [text for text in example.answers if normalize(text) not in ("yes", "no")]
    support = [item["text"] for item in example.gold_evidence if item.get("kind") == "sentence"]
    paragraphs = (example.context or "").split("\n\n")
    kept = [paragraph for paragraph in paragraphs
            if not any(_contains(normalize(paragraph), text) for text in [*answers, *support])]
    if len(kept) == len(paragraphs) or not kept:
        return None
    return dataclasses.replace(example, context="\n\n".join(kept), documents=None)


@dataclass
class ReaderModels:
    """The models every question's pipeline shares: loaded once from the pipeline settings."""

    memory_model: Any
    embedder: Any
    embedder_name: str
    recorder: PromptRecorder

    @classmethod
    def load(cls, pipeline: PipelineConfig) -> ReaderModels:
        loader = MemoRAG(pipeline)
        return cls(loader.memory_model, loader.embedder, loader.embedder_name, PromptRecorder(loader.generator))


def reader_record(models: ReaderModels, pipeline: PipelineConfig, example: Any, order: str,
                  form_kind: str = "benchmark") -> dict[str, Any]:
    """One sample: `example`'s context memorized, its question asked in the rag mode with the evidence
    in `order` under the answer prompt `form_kind` (`FORMS`), the prompt the pipeline sent and the target
    over its evidence (under the sentence form, the span ended as a sentence)."""
    config = dataclasses.replace(pipeline, evidence_order=order)
    rag = MemoRAG(config, memory_model=models.memory_model, embedder=models.embedder,
                  embedder_name=models.embedder_name, generator=models.recorder)
    rag.memorize([Document(id=CONTEXT_DOC_ID, text=example.context)], with_memory=False, show_progress=False)
    if form_kind not in FORMS:
        raise ValueError(f"answer form {form_kind!r}; choose from {', '.join(FORMS)}")
    form = as_answer_form(example.meta["answer_prompt"] if form_kind == "benchmark" else None)
    models.recorder.last = None
    answer = rag.ask(example.question, mode=MODE, answer_form=form)
    sent = models.recorder.last
    if sent is None:
        raise RuntimeError(f"the {MODE} mode sent no prompt for example {example.id}")
    target, why = reader_target(example, "\n".join(item.text for item in answer.evidence))
    if form_kind == "sentence" and not target.endswith((".", "!", "?")):
        target += "."
    return {"prompt": sent.prompt, "system": sent.system, "target": target, "why": why,
            "task": example.task, "id": example.id, "question": example.question, "metric": example.metric,
            "answer_prompt": form.name, "order": order,
            "row": example.meta.get("row"), "article": example.meta.get("article"),
            "answers": list(example.answers), "prompt_tokens": sent.count,
            "evidence_tokens": sum(item.num_tokens for item in answer.evidence),
            "passages": len(answer.evidence)}


def tuning_examples(source: str, count: int, context_tokens: int, seed: int, tokenizer: Any,
                    squad_answerable: str = "all") -> list[Any]:
    """`count` examples of `source` from its tuning split only, with long contexts of `context_tokens`;
    SQuAD's drawn among its `squad_answerable` questions ("all", "answerable" or "unanswerable": SQuAD v2's
    dev file is half unanswerable, and drawing the two apart sets the share of the fixed reply)."""
    if source == "hotpotqa":
        return hotpotqa_long_context(count, context_tokens, seed=seed, tokenizer=tokenizer, split="train")
    if source == "squad":
        return squad_long_context(count, context_tokens, seed=seed, tokenizer=tokenizer, answerable=squad_answerable,
                                  split="train")
    raise ValueError(f"source {source!r}; choose from {', '.join(SOURCES)}")


def interleave(groups: Sequence[Sequence[Any]], seed: int) -> list[Any]:
    """The items of `groups` in one seeded shuffled order."""
    items = [item for group in groups for item in group]
    random.Random(f"{seed}:reader-order").shuffle(items)
    return items


def build_reader_records(models: ReaderModels, pipeline: PipelineConfig, examples: Iterable[Any],
                         on_record: Callable[[dict[str, Any]], None], seed: int = 0,
                         forms: Sequence[str] = ("benchmark",), progress: bool = False,
                         twins: bool = False) -> Counter:
    """A record per example (`on_record`), the order (and, of several `forms`, the answer prompt) drawn
    per example by a seeded draw; with `twins`, after each record whose target is the answer, its twin
    (`without_answer`, the same form and order, `"twin": true`); what the targets were."""
    from tqdm.auto import tqdm

    rng = random.Random(f"{seed}:reader-evidence-order")
    form_rng = random.Random(f"{seed}:reader-answer-form")
    reasons: Counter = Counter()
    for example in tqdm(examples, desc="reader samples", unit="sample", disable=not progress):
        started = time.perf_counter()
        form_kind = forms[0] if len(forms) == 1 else form_rng.choice(list(forms))
        record = reader_record(models, pipeline, example, rng.choice(ORDERS), form_kind)
        record["build_s"] = round(time.perf_counter() - started, 3)
        reasons[f"{record['task']}:{record['why']}"] += 1
        on_record(record)
        twin = without_answer(example) if twins and record["why"] == "answer" else None
        if twin is None:
            continue
        started = time.perf_counter()
        twin_record = reader_record(models, pipeline, twin, record["order"], form_kind)
        twin_record.update(twin=True, build_s=round(time.perf_counter() - started, 3))
        reasons[f"{twin_record['task']}:twin {twin_record['why']}"] += 1
        on_record(twin_record)
    return reasons
