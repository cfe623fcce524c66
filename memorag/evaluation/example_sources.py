"""Where an evaluation task's examples come from: generators, builders over real sets, files.

Each source turns a request (how many examples, at which length, with which seed
and length measure) into either a list of :class:`EvalExample` (each with its own
context, or several sharing one) or a :class:`CorpusTask` (one shared corpus,
many questions). The builders and loaders themselves live in ``memorag.evaluation.tasks``;
this module only names them and checks their options up front.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memorag.evaluation.datasets import hotpotqa, schema, squad, synthetic
from memorag.evaluation.datasets.schema import CorpusTask, EvalExample
from memorag.evaluation.tasks import loaders

TaskData = list[EvalExample] | CorpusTask

# Arguments the runner fills in; a task's `options` may not set them.
_RESERVED = ("num_questions", "num_examples", "target_tokens", "seed", "tokenizer", "tokens_per_word", "path",
             "directory", "task", "counter", "index")
_SYNTHETIC_COMMON = ("filler", "tolerance")


@dataclass(frozen=True)
class BuildRequest:
    generator: str  # synthetic: the generated task
    path: str | None
    options: dict[str, Any]
    length: int | None
    num_examples: int
    seed: int
    tokenizer: Any  # None: approximate lengths
    tokens_per_word: float


@dataclass(frozen=True)
class TaskSource:
    """A named way to get a task's examples."""

    name: str
    function: Callable[..., Any]  # the builder or loader in memorag.training.data (its keywords are the options)
    build: Callable[[BuildRequest], TaskData]
    takes_length: bool  # whether a context (or corpus) length can be asked for
    shared_corpus: bool  # one corpus for every question
    needs_path: bool


def _synthetic(request: BuildRequest) -> TaskData:
    if request.length is None:
        raise ValueError(f"the generated task {request.generator!r} needs a context length; set lengths")
    return synthetic.generate_examples(
        request.generator, request.num_examples, request.length, seed=request.seed, tokenizer=request.tokenizer,
        tokens_per_word=request.tokens_per_word, **request.options,
    )


def _builder(function: Callable[..., Any], length_keyword: str) -> Callable[[BuildRequest], TaskData]:
    def build(request: BuildRequest) -> TaskData:
        return function(request.num_examples, **{length_keyword: request.length}, seed=request.seed,
                        tokenizer=request.tokenizer, tokens_per_word=request.tokens_per_word, **request.options)

    return build


def _file(function: Callable[..., Any]) -> Callable[[BuildRequest], TaskData]:
    def build(request: BuildRequest) -> TaskData:
        data = function(request.path, **request.options)
        if isinstance(data, CorpusTask):
            return CorpusTask(data.name, data.documents, data.examples[: request.num_examples], data.meta)
        return data[: request.num_examples]

    return build


SOURCES: dict[str, TaskSource] = {
    source.name: source
    for source in (
        TaskSource("synthetic", synthetic.generate_examples, _synthetic, True, False, False),
        TaskSource("hotpotqa", hotpotqa.hotpotqa_long_context,
                   _builder(hotpotqa.hotpotqa_long_context, "target_tokens"), True, False, False),
        TaskSource("squad", squad.squad_long_context,
                   _builder(squad.squad_long_context, "target_tokens"), True, False, False),
        TaskSource("hotpotqa_corpus", hotpotqa.hotpotqa_corpus_task,
                   _builder(hotpotqa.hotpotqa_corpus_task, "target_tokens"), True, True, False),
        TaskSource("squad_corpus", squad.squad_corpus_task,
                   _builder(squad.squad_corpus_task, "target_tokens"), True, True, False),
        TaskSource("examples", schema.read_examples, _file(schema.read_examples), False, False, True),
        TaskSource("corpus_dir", schema.load_corpus_task, _file(schema.load_corpus_task), False, True, True),
        TaskSource("longbench", loaders.load_longbench, _file(loaders.load_longbench), False, False, True),
        TaskSource("infinitebench", loaders.load_infinitebench, _file(loaders.load_infinitebench), False, False, True),
        TaskSource("ultradomain", loaders.load_ultradomain, _file(loaders.load_ultradomain), False, False, True),
        TaskSource("longrag", loaders.load_longrag, _file(loaders.load_longrag), False, False, True),
        TaskSource("loft", loaders.load_loft, _file(loaders.load_loft), False, True, True),
    )
}
"""Source name -> source. Built sources take a length; file sources read `path`."""


def source_options(source: str, generator: str) -> list[str]:
    """The options a source accepts (for `synthetic`, those of the generated task `generator`)."""
    if source == "synthetic":
        return sorted([*synthetic.task_options(generator), *_SYNTHETIC_COMMON])
    parameters = inspect.signature(SOURCES[source].function).parameters.values()
    return sorted(p.name for p in parameters
                  if p.kind is inspect.Parameter.KEYWORD_ONLY or (p.default is not inspect.Parameter.empty
                                                                  and p.name not in _RESERVED))


def check_source_options(source: str, generator: str, path: str | None, options: dict[str, Any]) -> None:
    """Raise ValueError naming the problem when a task's source settings cannot work."""
    spec = SOURCES[source]
    if source == "synthetic" and generator not in synthetic.SYNTHETIC_TASKS:
        raise ValueError(f"unknown generated task {generator!r}; choose one of {', '.join(synthetic.SYNTHETIC_TASKS)} "
                         "(set `generator`, or name the task after one)")
    if spec.needs_path and not path:
        raise ValueError(f"source {source!r} reads files: set `path`")
    if not spec.needs_path and path:
        raise ValueError(f"source {source!r} reads no file; remove `path`")
    allowed = [name for name in source_options(source, generator) if name not in _RESERVED]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"source {source!r} has no option {', '.join(unknown)}; its options: {', '.join(allowed)}")


def build_task_data(source: str, request: BuildRequest) -> TaskData:
    """The examples (or the shared corpus) of one task at one length."""
    return SOURCES[source].build(request)
