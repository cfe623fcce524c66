"""The evaluation loop: modes x tasks x context lengths, each cell scored, timed and measured.

How a cell runs. The examples of a task at one length are grouped by what must
be memorized: a per-question task has a context per example (examples that
share one, as in UltraDomain, form one group); a shared-corpus task is one
group, its corpus. Each group is memorized ONCE into a fresh ``MemoRAG`` (the
models are loaded once and shared by all of them), and every pending mode asks
every question of the group on it. Memorizing is split into two measured
stages: ``index`` (chunk and embed; every mode needs it) and ``memory`` (the
memory model reads the text), which runs only when a pending mode needs the
memory (``Mode.needs_memory``), and is charged only to those modes.

Each asked question is a record (see ``results_store``): the prediction and its score
by the example's metric, recall of the gold evidence (``recall``), the tokens
given to the generator (``measure.MeteredGenerator``) and the evidence's own tokens
(``measure.evidence_tokens``), whether it answered (``Answer.answered``), the mode's stage
timings, and peak memory per stage (``measure.PeakMemory``). Records are written
as they are made; a rerun skips what is recorded.

With ``shard=I/N`` (``shards``) a run asks only the questions its shard owns, into
``OUT/shards/I-of-N/``; ``merge.merge_shards`` joins the N parts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from memorag.config import save_config
from memorag.evaluation import recall as recall_lib
from memorag.evaluation import scoring
from memorag.evaluation.config import (
    EvalConfig,
    TaskSpec,
    label_generator,
    mode_task,
    parse_mode,
    resolved_pipeline,
    task_identity,
)
from memorag.evaluation.datasets.hotpotqa import hotpotqa_few_shot
from memorag.evaluation.datasets.lengths import count_tokens
from memorag.evaluation.datasets.schema import CorpusTask, EvalExample
from memorag.evaluation.example_sources import BuildRequest, build_task_data
from memorag.evaluation.measure import MeteredGenerator, PeakMemory, evidence_tokens
from memorag.evaluation.results_store import CONFIG_FILE, PROMPTS_FILE, CellKey, ResultStore
from memorag.evaluation.shards import Shard, ShardManifest
from memorag.evaluation.summary import summarize_cell
from memorag.evaluation.tasks.loaders import loft_few_shot
from memorag.generation import Generator
from memorag.modes import get_mode
from memorag.pipeline import FewShotExample, MemoRAG, PipelineConfig
from memorag.prompting import prompts
from memorag.prompting.answer_forms import AnswerForm, AnswerFormError, as_answer_form
from memorag.retrieval.chunking import Document
from memorag.runtime.embedded import UNTRAINED_MEMORY, describe_memory_weights
from memorag.storage.io import atomic_write_text

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1  # of records and cells; part of every fingerprint


class EvalError(RuntimeError):
    """A task whose examples cannot be evaluated as configured."""


@dataclass
class Models:
    """The models every pipeline of a run shares (loaded once)."""

    memory_model: Any
    embedder: Any | None  # None with the bm25 retriever
    embedder_name: str
    generator: Generator

    @classmethod
    def load(cls, pipeline: PipelineConfig) -> Models:
        """Load the models `pipeline` names (embedded defaults when it names none)."""
        loader = MemoRAG(pipeline)
        loader.check_models()
        loader.check_generator()
        embedder = loader.embedder if pipeline.retriever != "bm25" else None
        return cls(loader.memory_model, embedder, loader.embedder_name, loader.generator)


@dataclass
class ContextGroup:
    """What is memorized once, and the questions asked over it."""

    context_id: str
    documents: list[Document]
    examples: list[EvalExample]
    as_documents: bool  # gold evidence is matched by document ids (else by context offsets)
    context_tokens: int | None


def _sha(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def group_examples(data: list[EvalExample] | CorpusTask, name: str, memorize: str = "context") -> list[ContextGroup]:
    """The memorize-once groups of a task's examples (one for a shared corpus); `name` prefixes their ids.

    `memorize`: a per-question example's ``"context"`` (one text) or its ``"documents"``.
    """
    prefix = name
    if isinstance(data, CorpusTask):
        content = _sha([[d.id, d.title, d.text] for d in data.documents])
        return [ContextGroup(f"{prefix}:{content[:16]}", list(data.documents), list(data.examples), True,
                             data.meta.get("length"))]
    groups: dict[str, ContextGroup] = {}
    for example in data:
        if memorize == "documents":
            if not example.documents:
                raise EvalError(f"{name}: example {example.id} has no documents to memorize; set "
                                "memorize: context, or build them (e.g. options: {with_documents: true})")
            documents = list(example.documents)
            content = _sha([[d.id, d.title, d.text] for d in documents])
        else:
            if not example.context:
                raise EvalError(f"{name}: example {example.id} has no context; "
                                "set memorize: documents for examples that come as documents")
            documents = [Document(id=recall_lib.CONTEXT_DOC_ID, text=example.context)]
            content = _sha(example.context)
        group = groups.setdefault(content, ContextGroup(f"{prefix}:{content[:16]}", documents, [],
                                                        memorize == "documents", example.meta.get("length")))
        group.examples.append(example)
    return list(groups.values())


class EvalRunner:
    """Runs an :class:`EvalConfig`; `models` (e.g. test fakes) skip loading the configured ones."""

    def __init__(self, config: EvalConfig, models: Models | None = None):
        self.config = config
        self._models = models
        self._injected = models is not None  # given models are named in the fingerprints
        self._meter: MeteredGenerator | None = None
        self._meters: dict[str, MeteredGenerator] = {}  # the generators labels name (`meter_for`)
        self.shard = Shard.parse(config.shard) if config.shard else None
        # where this run's results go: the run's folder, or its shard's folder inside it
        self.results_dir = self.shard.directory(config.out_dir) if self.shard else Path(config.out_dir)
        self.store = ResultStore(self.results_dir)
        self.manifest = ShardManifest(self.results_dir, self.shard) if self.shard else None
        self.models_record: dict[str, Any] | None = None  # set by run()
        self.peak = PeakMemory()

    # -- models, loaded when there is work -----------------------------------------------------
    @property
    def models(self) -> Models:
        if self._models is None:
            logger.info("loading models")
            self._models = Models.load(self.config.pipeline)
        return self._models

    @property
    def meter(self) -> MeteredGenerator:
        if self._meter is None:
            self._meter = MeteredGenerator(self.models.generator)
        return self._meter

    def meter_for(self, label: str) -> MeteredGenerator:
        """The generator mode `label` answers with (`label_generator`), metered; each loaded once, as the
        pipeline loads a generator (a local one shares the memory model where it can)."""
        spec = label_generator(label)
        if spec is None:
            return self.meter
        if spec not in self._meters:
            models = self.models
            loader = MemoRAG(dataclasses.replace(self.config.pipeline, generator=spec), memory_model=models.memory_model,
                             embedder=models.embedder, embedder_name=models.embedder_name)
            self._meters[spec] = MeteredGenerator(loader.generator)
        return self._meters[spec]

    def new_pipeline(self) -> MemoRAG:
        models = self.models
        return MemoRAG(self.config.pipeline, memory_model=models.memory_model, embedder=models.embedder,
                       embedder_name=models.embedder_name, generator=self.meter)

    # -- identity of results ---------------------------------------------------------------------
    def models_identity(self) -> dict[str, Any]:
        """The models the answers come from: their names, and the memory weights by the hash of the
        loaded parameters (a name such as ``auto`` does not say which weights it loaded)."""
        models = self.models
        memory = models.memory_model
        pipeline = self.config.pipeline
        weights_hash = getattr(memory, "memory_weights_hash", None)
        return {"memory_model": getattr(memory, "name", None),
                "memory_weights": "given" if self._injected else memory_weights_source(pipeline),
                "memory_weights_sha256": weights_hash() if callable(weights_hash) else None,
                "generator": models.generator.name, "embedder": models.embedder_name}

    def fingerprint(self, label: str, task: TaskSpec) -> str:
        """What a cell's results depend on (not the number of examples, nor the length: keys of their own)."""
        cfg = self.config
        injected = None
        if self._injected:
            injected = {"memory_model": getattr(self._models.memory_model, "name", None),
                        "embedder": self._models.embedder_name, "generator": self._models.generator.name}
        payload = {"format": FORMAT_VERSION, "pipeline": resolved_pipeline(cfg), "models": injected,
                   "answer_prompts": cfg.answer_prompts,
                   "mode": label, "pipeline_task": mode_task(label, task.kind), "task": task_identity(task),
                   "seed": cfg.seed, "length_unit": cfg.length_unit, "tokens_per_word": cfg.tokens_per_word,
                   "recall_k": sorted(cfg.recall_k), "span_coverage": cfg.span_coverage}
        if label_generator(label) is not None:  # which weights the label's generator loaded, by their name
            payload["generator"] = self.meter_for(label).name
        return _sha(payload)[:16]

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> list[dict[str, Any]]:
        """Run every pending cell; returns the summaries of this configuration's cells."""
        save_config(self.config, self.results_dir / CONFIG_FILE)
        self.models_record = self.models_identity()
        self.store.check_models(self.models_record)
        atomic_write_text(self.results_dir / PROMPTS_FILE, json.dumps(prompt_tables(), indent=1,
                                                                      ensure_ascii=False) + "\n")
        wanted: list[CellKey] = []
        for task in self.config.tasks:
            if not self.config.task_modes(task):
                logger.info("%s: none of this run's modes asks it, skipped", task.name)
                continue
            for length in self.config.task_lengths(task):
                self.run_task(task, length)
                wanted.extend((label, task.name, length) for label in self.config.task_modes(task))
        if self.manifest is not None:
            self.manifest.finish()
        cells = {(c["mode"], c["task"], c["length"]): c for c in self.store.cells()}
        return [cells[key] for key in wanted if key in cells]

    def run_task(self, task: TaskSpec, length: int | None) -> None:
        """Every pending cell of `task` at `length`."""
        requested = self.config.task_num_examples(task)
        fingerprints = {label: self.fingerprint(label, task) for label in self.config.task_modes(task)}
        for label, fingerprint in fingerprints.items():
            self.store.check((label, task.name, length), fingerprint)
        pending = [label for label in fingerprints
                   if not self.store.is_finished((label, task.name, length), fingerprints[label], requested)]
        part = self.manifest.part(task.name, length) if self.manifest is not None else None
        if not pending or (part is not None and part["requested"] == requested and not part["owned"]):
            logger.info("%s at length %s: every cell is finished, skipped", task.name, length)
            return
        data = self.build(task, length, requested)
        examples = data.examples if isinstance(data, CorpusTask) else data
        if not examples:
            raise EvalError(f"task {task.name!r} at length {length} has no examples")
        ids = [example.id for example in examples]
        if len(set(ids)) != len(ids):
            raise EvalError(f"task {task.name!r}: example ids are not unique; give each example its own id")
        try:
            for example in examples:
                scoring.check_metric(example)
        except scoring.MetricError as error:
            raise EvalError(f"task {task.name!r}: {error}") from error
        if self.shard is not None:
            examples = [example for example in examples if self.shard.owns(task.name, length, example.id)]
            self.manifest.record_part(task.name, length, requested, ids, [example.id for example in examples])
            if not examples:
                logger.info("%s at length %s: no question of shard %s", task.name, length, self.shard)
                return
            ids = [example.id for example in examples]
            data = (CorpusTask(data.name, data.documents, examples, data.meta) if isinstance(data, CorpusTask)
                    else examples)
        groups = group_examples(data, f"{task.name}@{length}", task.memorize)
        few_shot = self.few_shot(task) if any(parse_mode(label)[0] == "cic" for label in pending) else []
        todo = {example.id: [label for label in pending if not self.store.has((label, task.name, length), example.id)]
                for example in examples}
        with tqdm(total=sum(map(len, todo.values())), desc=f"{task.name} @ {length}", unit="answer",
                  disable=not self.config.progress, dynamic_ncols=True) as bar:
            for group in groups:
                labels = sorted({label for example in group.examples for label in todo[example.id]},
                                key=pending.index)
                if not labels:
                    continue
                rag, prepare = self.prepare(group, labels)
                rag.few_shot = few_shot
                for example in group.examples:
                    for label in todo[example.id]:
                        self.store.add(self.ask(rag, label, task, length, example, group, prepare,
                                                fingerprints[label]))
                        bar.update()
        for label in pending:
            key = (label, task.name, length)
            records = self.store.records(key, ids)
            if len(records) != len(ids):
                raise EvalError(f"cell {key}: {len(records)} of {len(ids)} examples recorded")
            self.store.finish(summarize_cell(records, fingerprint=fingerprints[label], requested=requested,
                                             num_examples=len(ids)))

    def build(self, task: TaskSpec, length: int | None, requested: int) -> list[EvalExample] | CorpusTask:
        cfg = self.config
        tokenizer = self.models.memory_model.tokenizer if cfg.length_unit == "tokens" else None
        request = BuildRequest(generator=task.generator or task.name, path=task.path, options=dict(task.options),
                               length=length, num_examples=requested, seed=cfg.seed, tokenizer=tokenizer,
                               tokens_per_word=cfg.tokens_per_word)
        logger.info("building %s at length %s (%d examples)", task.name, length, requested)
        try:
            return build_task_data(task.source, request)
        except (ValueError, FileNotFoundError) as error:
            raise EvalError(f"task {task.name!r} at length {length}: {error}") from error

    def few_shot(self, task: TaskSpec) -> list[FewShotExample]:
        """The task's labelled questions for the cic mode's examples, as LOFT builds them: HotpotQA
        training rows (below 5,000) for the HotpotQA sources, a LOFT folder's own few-shot queries;
        none for other sources (the mode then generates examples from the corpus)."""
        count = self.config.pipeline.cic.examples
        if task.source in ("hotpotqa", "hotpotqa_corpus"):
            return hotpotqa_few_shot(count, seed=self.config.seed, path=task.options.get("path"))
        if task.source == "loft":
            return loft_few_shot(task.path, task_type=task.options.get("task_type"))[:count]
        return []

    def prepare(self, group: ContextGroup, labels: list[str]) -> tuple[MemoRAG, dict[str, Any]]:
        """Memorize a group once: chunks and index always, the memory when a mode needs it."""
        rag = self.new_pipeline()
        prepare: dict[str, Any] = {}
        with self.peak.stage(prepare, "index"):
            report = rag.memorize(group.documents, with_memory=False, show_progress=False)
        prepare.update(num_chunks=report.num_chunks, stage_s=dict(report.timings))
        if group.context_tokens is None:  # the source did not measure it: count in the memory model's tokens
            group.context_tokens = sum(count_tokens(rag.tokenizer, document.text) for document in group.documents)
        if any(get_mode(parse_mode(label)[0]).needs_memory for label in labels):
            with self.peak.stage(prepare, "memory"):
                rag.ensure_memory(show_progress=False)
            prepare["memory_tokens"] = rag.memory.num_tokens
        return rag, prepare

    def query(self, example: EvalExample, kind: str) -> str:
        if example.question.strip() or kind != "summarize":
            return example.question
        language = "en" if self.config.pipeline.language == "auto" else self.config.pipeline.language
        return prompts.fill(prompts.DEFAULT_SUMMARY_REQUEST, language)

    def answer_form(self, example: EvalExample) -> AnswerForm:
        """The generator's answer prompt for `example`: its benchmark's own (``meta["answer_prompt"]``,
        else RULER's qa template), or the sentence prompt when `answer_prompts` says so."""
        if self.config.answer_prompts == "sentence":
            return AnswerForm()
        try:
            return as_answer_form(example.meta.get("answer_prompt") or {"name": "ruler:qa"})
        except AnswerFormError as error:
            raise EvalError(f"example {example.id} of task {example.task}: {error}") from error

    @staticmethod
    def used_answer_prompt(name: str, pipeline_task: str) -> bool:
        """Whether mode `name` answered `pipeline_task` with the pipeline's answer prompt."""
        mode = get_mode(name)
        return (mode.uses_answer_prompt and pipeline_task != "summarize"
                and pipeline_task not in mode.tasks_without_evidence)

    def ask(self, rag: MemoRAG, label: str, task: TaskSpec, length: int | None, example: EvalExample,
            group: ContextGroup, prepare: dict[str, Any], fingerprint: str) -> dict[str, Any]:
        """Ask one question in one mode and make its record."""
        name, _ = parse_mode(label)
        pipeline_task = mode_task(label, task.kind)
        form = self.answer_form(example)
        meter = self.meter_for(label)
        if meter is not self.meter:
            rag = rag.with_generator(meter)
        meter.take()
        ask: dict[str, float] = {}
        try:
            with self.peak.stage(ask, "ask"):
                answer = rag.ask(self.query(example, task.kind), task=pipeline_task, mode=name, answer_form=form)
        except Exception as error:
            error.add_note(f"while asking example {example.id} of task {task.name!r} (length {length}) "
                           f"in mode {label!r}; finished examples are kept, rerun to resume")
            raise
        prompt_tokens = meter.take()
        ks = self.config.recall_k
        if pipeline_task in get_mode(name).tasks_without_evidence:
            recall = recall_lib.not_applicable(ks)
        else:
            units = recall_lib.gold_units(example.gold_evidence, group.as_documents)
            scored = [((e.doc_id, e.start_char, e.end_char), e.score) for e in answer.evidence]
            recall = recall_lib.recall_report(units, scored, ks, self.config.span_coverage)
        return {
            "mode": label, "task": task.name, "length": length, "example_id": example.id,
            "fingerprint": fingerprint, "pipeline_task": pipeline_task, "source_task": example.task,
            "question": example.question, "answers": example.answers, "prediction": answer.answer,
            "metric": example.metric, "score": scoring.score(answer.answer, example), "recall": recall,
            "evidence": [[e.doc_id, e.start_char, e.end_char, e.score] for e in answer.evidence],
            "evidence_tokens": evidence_tokens(answer.evidence),
            "answered": answer.answered,
            "evidence_ids": [e.chunk_id for e in answer.evidence],  # NO_CHUNK (-1): whole documents or cut text
            "evidence_order": rag.mode(name).evidence_order(pipeline_task),
            "answer_prompt": form.to_dict() if self.used_answer_prompt(name, pipeline_task) else None,
            "source_row": example.meta.get("row"), "source_split": example.meta.get("split"),
            "few_shot": (("labelled" if rag.few_shot else "generated") if name == "cic" else None),
            "clues": answer.clues, "raw_clues": answer.raw_clues, "extras": answer.extras, "warnings": answer.warnings,
            "generator": answer.generator,
            "generator_prompt_tokens": prompt_tokens,
            "timings": answer.timings, "ask": ask, "context_id": group.context_id, "prepare": prepare,
            "needs_memory": get_mode(name).needs_memory, "context_tokens": group.context_tokens,
            "rss_scope": self.peak.scope, "proxy": example.proxy,
        }


def memory_weights_source(pipeline: PipelineConfig) -> str:
    """Where the memory weights came from, in words: a released checkpoint's own (its `memory_model`
    carries them, so `auto` loads them), else as `describe_memory_weights` says."""
    described = describe_memory_weights(pipeline.memory_model, pipeline.memory_weights)
    if described != UNTRAINED_MEMORY or pipeline.memory_model is None:
        return described
    from transformers import AutoConfig

    from memorag.memory.released import is_released_config
    from memorag.runtime.embedded import resolve_lm

    config = AutoConfig.from_pretrained(resolve_lm(pipeline.memory_model))  # read when the model loaded
    return f"released in {pipeline.memory_model}" if is_released_config(config) else described


def prompt_tables() -> dict[str, Any]:
    """Every prompt of the package (`memorag.prompting.prompts`), as the run used them."""
    return {name: value for name, value in vars(prompts).items()
            if name.isupper() and isinstance(value, dict | tuple | str) and name != "LANGUAGES"}


def run_evaluation(config: EvalConfig, models: Models | None = None, command: str = "") -> tuple[list[dict], Path]:
    """Run (or resume) `config`, then write the markdown report and the plots; returns the cells and
    the report's path."""
    from memorag.evaluation.plots import write_plots
    from memorag.evaluation.report import write_report

    runner = EvalRunner(config, models)
    cells = runner.run()
    # a shard's report covers its part; the plots are drawn from the whole run, by the merge
    plots = write_plots(runner.results_dir, cells) if config.plots and runner.shard is None else []
    report = write_report(runner.results_dir, cells, config.recall_k, command=command, plots=plots,
                          models=runner.models_record)
    return cells, report
