"""The evaluation run's settings: which modes, on which tasks, at which context lengths.

    cfg = load_eval_config("configs/eval/smoke.yaml", ["num_examples=2", "modes=[rag]"])

A mode is named as in the registry, optionally with the pipeline task to ask it
with: ``"rag"``, ``"memorag"`` (its default task, ``memorag``: clues drive
retrieval) or ``"memorag:qa"`` (the memory model answers from memory alone). The
mode string is also the mode's label in the results. Everything is checked here,
before any model loads: unknown keys, modes, sources, generated tasks and their
options are errors that name the problem and the choices.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from memorag.config import ConfigError, config_to_dict, load_config
from memorag.evaluation.example_sources import SOURCES, TaskSource, check_source_options
from memorag.evaluation.shards import Shard
from memorag.pipeline.types import PipelineConfig


@dataclass
class TaskSpec:
    """One evaluation task: where its examples come from and how they are built.

    ``source`` is a name in ``memorag.evaluation.example_sources.SOURCES``: a generated
    task (``synthetic``, with ``generator`` naming it), a builder over the real
    sets (``hotpotqa``, ``squad``: a context per question; ``hotpotqa_corpus``,
    ``squad_corpus``: one shared corpus), or files (``examples``: EvalExample
    JSON lines; ``corpus_dir``: a saved corpus task; ``longbench``,
    ``infinitebench``, ``ultradomain``, ``longrag``, ``loft``: original formats).
    ``options`` go to the builder or loader as keyword arguments.
    """

    name: str
    source: str
    generator: str | None = None  # synthetic: the generated task (default: `name`)
    path: str | None = None  # file sources
    options: dict[str, Any] = field(default_factory=dict)
    lengths: list[int | None] | None = None  # None: the run's `lengths` (built sources) or as given (files)
    num_examples: int | None = None  # None: the run's `num_examples`
    kind: Literal["qa", "summarize"] = "qa"  # which pipeline task the modes are asked with
    memorize: Literal["context", "documents"] = "context"  # per-question tasks: one text, or its documents
    # the modes this task may be asked in: it is asked in those of the run's `modes` named here (None: all);
    # a run whose modes name none of them skips the task
    modes: list[str] | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"task name {self.name!r}: use letters, digits, '_' and '-' only")
        source = SOURCES.get(self.source)
        if source is None:
            raise ConfigError(
                f"task {self.name!r}: unknown source {self.source!r}; choose one of {', '.join(SOURCES)}"
            )
        if self.num_examples is not None and self.num_examples < 1:
            raise ConfigError(f"task {self.name!r}: num_examples={self.num_examples} must be at least 1")
        if self.lengths is not None:
            if not self.lengths:
                raise ConfigError(f"task {self.name!r}: lengths is empty; give lengths or leave it out")
            if not source.takes_length and any(length is not None for length in self.lengths):
                raise ConfigError(
                    f"task {self.name!r}: source {self.source!r} has lengths fixed by its files; remove `lengths`"
                )
            if any(length is not None and length < 16 for length in self.lengths):
                raise ConfigError(f"task {self.name!r}: lengths {self.lengths} must be at least 16 tokens")
        if source.shared_corpus and self.memorize != "context":
            raise ConfigError(f"task {self.name!r}: a shared-corpus source is always memorized as its documents; "
                              "remove `memorize`")
        try:
            check_source_options(self.source, self.generator or self.name, self.path, self.options)
        except ValueError as error:
            raise ConfigError(f"task {self.name!r}: {error}") from error

    @property
    def spec_source(self) -> TaskSource:
        return SOURCES[self.source]


@dataclass
class EvalConfig:
    """Every setting of an evaluation run (``python eval/run.py --help`` lists them)."""

    out_dir: str = "runs/eval"
    modes: list[str] = field(default_factory=lambda: ["rag", "memorag"])
    tasks: list[TaskSpec] = field(default_factory=list)
    lengths: list[int | None] = field(default_factory=lambda: [4096])  # context tokens, for built tasks
    num_examples: int = 10  # per task and length
    seed: int = 0
    length_unit: Literal["tokens", "approx"] = "tokens"  # exact in the memory model's tokens, or words x 1.3
    tokens_per_word: float = 1.3  # the approximate unit's factor
    recall_k: list[int] = field(default_factory=lambda: [1, 3])  # recall@k of gold evidence (and over all)
    span_coverage: float = 1.0  # share of a gold span's characters the evidence must cover
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    # the generator's answer prompt: "benchmark" (each example's own benchmark form: LongBench's template
    # for HotpotQA, RULER's for its tasks and SQuAD, RULER's qa template where a task names none), or
    # "sentence" (the interactive prompt); see memorag/prompting/answer_forms.py
    answer_prompts: Literal["benchmark", "sentence"] = "benchmark"
    # a second reader: shorthand for pipeline.generator / pipeline.generator_model, e.g.
    # generator=http://host:8000/v1 generator_model=NAME (an OpenAI-compatible endpoint for every mode)
    generator: str | None = None
    generator_model: str | None = None
    plots: bool = True  # PNG plots (needs matplotlib)
    progress: bool = True  # progress bars on stderr
    # "I/N": ask only the I-th (from 0) of N disjoint parts of the questions, into out_dir/shards/I-of-N/;
    # `python eval/run.py --config C --merge` joins them (memorag/evaluation/shards.py). None: every question,
    # unless a launcher started several processes (RANK and WORLD_SIZE: one part each)
    shard: str | None = None

    def __post_init__(self) -> None:
        for name in ("generator", "generator_model"):
            value, inner = getattr(self, name), getattr(self.pipeline, name)
            if value is not None and inner is not None and value != inner:
                raise ConfigError(f"{name}={value!r} and pipeline.{name}={inner!r} disagree; set one of them")
            if value is not None:
                setattr(self.pipeline, name, value)
        if self.shard is not None:
            self.shard = str(Shard.parse(self.shard))
        if self.answer_prompts not in ("benchmark", "sentence"):
            raise ConfigError(f"answer_prompts={self.answer_prompts!r}; choose benchmark or sentence")
        if not self.modes:
            raise ConfigError("modes is empty; name at least one mode (e.g. modes=[rag,memorag])")
        if len(set(self.modes)) != len(self.modes):
            raise ConfigError(f"modes {self.modes} name a mode twice")
        for mode in self.modes:
            parse_mode(mode)
        if not self.tasks:
            raise ConfigError("tasks is empty; add at least one task (see configs/eval/smoke.yaml)")
        names = [task.name for task in self.tasks]
        if len(set(names)) != len(names):
            raise ConfigError(f"task names {names} are not unique")
        for task in self.tasks:
            if task.modes == []:
                raise ConfigError(f"task {task.name!r}: modes is empty; name its modes or remove `modes`")
            for mode in task.modes or []:
                parse_mode(mode)
            for mode in self.task_modes(task):
                mode_task(mode, task.kind)
        if not self.lengths or any(length is not None and length < 16 for length in self.lengths):
            raise ConfigError(f"lengths={self.lengths}: give context lengths of at least 16 tokens")
        if self.num_examples < 1:
            raise ConfigError(f"num_examples={self.num_examples} must be at least 1")
        if not self.recall_k or any(k < 1 for k in self.recall_k):
            raise ConfigError(f"recall_k={self.recall_k}: give positive ks (e.g. recall_k=[1,3])")
        if not 0.0 < self.span_coverage <= 1.0:
            raise ConfigError(f"span_coverage={self.span_coverage} must be in (0, 1]")
        if not self.tokens_per_word > 0:
            raise ConfigError(f"tokens_per_word={self.tokens_per_word} must be positive")
        if self.plots:
            try:
                import matplotlib  # noqa: F401
            except ImportError as error:
                raise ConfigError(
                    "plots=true needs matplotlib: pip install matplotlib (or pip install -e '.[plots]'), "
                    "or set plots=false"
                ) from error

    def task_lengths(self, task: TaskSpec) -> list[int | None]:
        """The context lengths `task` runs at (None: as the source gives it)."""
        if task.lengths is not None:
            return list(task.lengths)
        source = task.spec_source
        if not source.takes_length or source.shared_corpus:
            return [None]
        return list(self.lengths)

    def task_modes(self, task: TaskSpec) -> list[str]:
        """The modes `task` is asked in, in the run's order."""
        return [mode for mode in self.modes if task.modes is None or mode in task.modes]

    def task_num_examples(self, task: TaskSpec) -> int:
        return task.num_examples if task.num_examples is not None else self.num_examples


def parse_mode(label: str) -> tuple[str, str | None]:
    """``"memorag:qa"`` -> ``("memorag", "qa")``; the mode must be registered and do that task. A label may
    name the generator it answers with after ``@`` (``"rag@embedded-base"``, `label_generator`)."""
    from memorag.modes import get_mode
    from memorag.pipeline.types import UnknownModeError

    label_generator(label)
    name, _, task = label.partition("@")[0].partition(":")
    try:
        mode = get_mode(name)
    except UnknownModeError as error:
        raise ConfigError(f"modes: {error}") from error
    if task and task not in mode.tasks:
        raise ConfigError(f"modes: mode {name!r} does not do task {task!r}; its tasks: {', '.join(mode.tasks)}")
    return name, task or None


def label_generator(label: str) -> str | None:
    """The generator a mode label names after ``@`` (``"memorag@embedded"`` -> ``"embedded"``), or None: the
    run's own (`pipeline.generator`). Labels of one run that name other generators share each context's
    index and memory, so readers are compared over the same evidence at the cost of one memorize."""
    _, at, spec = label.partition("@")
    if at and not spec.strip():
        raise ConfigError(f"modes: {label!r} names no generator after '@'; e.g. rag@embedded-base")
    return spec.strip() or None


def mode_task(label: str, kind: str) -> str:
    """The pipeline task that mode `label` is asked with on a task of `kind` (qa or summarize)."""
    from memorag.modes import get_mode

    name, task = parse_mode(label)
    mode = get_mode(name)
    if kind == "summarize":
        if task not in (None, "summarize") or "summarize" not in mode.tasks:
            raise ConfigError(
                f"mode {label!r} cannot run a summarize task (its tasks: {', '.join(mode.tasks)}); "
                "remove the mode or the task from this run"
            )
        return "summarize"
    if task == "summarize":
        raise ConfigError(f"mode {label!r} asks for summaries but the task is question answering; use {name!r}")
    if task is not None:
        return task
    if mode.default_task in ("qa", "memorag"):
        return mode.default_task
    if "qa" in mode.tasks:  # e.g. cic, whose default answers with document ids
        return "qa"
    raise ConfigError(f"mode {label!r} does not answer questions (its tasks: {', '.join(mode.tasks)}); "
                      f"name its task, e.g. {name}:{mode.default_task}, or remove it")


def load_eval_config(path: str | os.PathLike[str] | None = None, overrides: list[str] | tuple[str, ...] = ()) -> EvalConfig:
    """Defaults <- the YAML file <- ``key=value`` overrides; file paths in tasks become absolute."""
    cfg = load_config(EvalConfig, path, list(overrides))
    for task in cfg.tasks:
        if task.path is not None:
            task.path = os.path.abspath(os.path.expanduser(task.path))
    return cfg


def task_identity(task: TaskSpec) -> dict[str, Any]:
    """What the examples of `task` depend on (not how many, nor at which lengths)."""
    data = config_to_dict(task)
    data.pop("lengths")
    data.pop("num_examples")
    data.pop("modes")  # which modes ask it, not what each one's answers depend on
    return data


# Where a run computes, not what: left out of the results' identity (the report names the machine).
# The precision settings are left out only at their defaults, so results made before they existed
# keep their identity.
_PLACEMENT_KEYS = ("device", "threads")
_PRECISION_DEFAULTS = {"dtype": "auto", "quantize": None}


def resolved_pipeline(cfg: EvalConfig) -> dict[str, Any]:
    """The pipeline settings that define a cell's results."""
    data = config_to_dict(cfg.pipeline)
    data.pop("mode")
    for key in _PLACEMENT_KEYS:
        data.pop(key)
    for key, default in _PRECISION_DEFAULTS.items():
        if data[key] == default:
            data.pop(key)
    return data

