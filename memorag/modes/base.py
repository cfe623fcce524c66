"""The mode interface and registry: one way of answering over a memorized corpus per mode."""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from memorag.errors import UnknownModeError
from memorag.modes.context import ModeContext
from memorag.modes.evidence import clue_hits_first
from memorag.modes.evidence_plan import RetrievalPlan
from memorag.modes.results import Answer, AskHooks, timed
from memorag.modes.scores import ORDER_WORDS, one_list_score


class Mode(ABC):
    """One way of answering over a memorized corpus.

    To add a mode, subclass `Mode` in a module of its own, give it a `name`, its `tasks` and
    `default_task`, and decorate it with `@register_mode`: that is the one place a mode is named.
    A module of `memorag.modes` is found by itself (every module of the package is imported on
    the first lookup); a mode elsewhere is available once its module is imported. Settings of its own are a small
    dataclass in the same module (`settings_key` names its section of `PipelineConfig`).

    `prepare(context)` runs before the first `answer` and again whenever the corpus changed
    (build mode-specific structures there: groups, graphs...). `answer(context, query, task,
    hooks)` answers the user's query for a task of `tasks`. Both get a `ModeContext`: the
    corpus, its retriever, the generator, memory model and memory (loaded on first use), the
    shared settings and the mode's own, and the question's `EvidenceStep`. A mode keeps what it
    builds, never the context. The pipeline times the whole call.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""  # one line for a user choosing a mode (the inspector's mode list)
    tasks: ClassVar[tuple[str, ...]]
    default_task: ClassVar[str]
    settings_key: ClassVar[str | None] = None  # the `PipelineConfig` field of this mode's own settings
    needs_memory: ClassVar[bool] = False  # whether `memorize` should build the memory for it
    needs_gists: ClassVar[bool] = False  # whether `memorize` should write the gist memory for it (memorag/lite/)
    # tasks answered from no retrieved or given text (e.g. from the memory alone): recall does not apply
    tasks_without_evidence: ClassVar[tuple[str, ...]] = ()
    # the order this mode gives its retrieved evidence in ("document" or "best-first"), which the
    # `evidence_order` setting can override; None: the mode retrieves nothing to order (full, cic)
    own_evidence_order: ClassVar[str | None] = "document"
    # whether the generator answers with the pipeline's answer prompt (`EvidenceStep.answer_form`: the
    # sentence prompt or a benchmark's); modes with a protocol of their own (longrag, cic) say no
    uses_answer_prompt: ClassVar[bool] = True

    def __init__(self, evidence_order: str = "own"):
        self.evidence_order_setting = evidence_order  # the pipeline's `evidence_order` setting

    @classmethod
    def settings_of(cls, config: Any) -> Any:
        """This mode's own settings in the pipeline's `config` (a `PipelineConfig`): its
        `settings_key` section, or None for a mode without settings."""
        return getattr(config, cls.settings_key) if cls.settings_key else None

    @classmethod
    def score_meaning(cls, config: Any) -> str:
        """What `Evidence.score` of this mode's answers measures under the pipeline's `config` (a
        `PipelineConfig`), in one line (`memorag.modes.scores`); by default the question's own list."""
        return one_list_score(config.fusion)

    def prepare(self, context: ModeContext) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Build what this mode needs from the corpus (called again after it changes)."""

    @abstractmethod
    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        """Answer `query` for `task`."""

    def evidence_order(self, task: str | None = None) -> str | None:
        """The order the generator reads this mode's evidence in for `task`: the `evidence_order`
        setting, or the mode's own; None when it retrieves nothing to order."""
        if self.own_evidence_order is None or (task is not None and task in self.tasks_without_evidence):
            return None
        setting = self.evidence_order_setting
        return self.own_evidence_order if setting == "own" else setting

    def retrieve_and_answer(
        self,
        context: ModeContext,
        query: str,
        task: str,
        language: str,
        hooks: AskHooks,
        timings: dict[str, float],
        plan: RetrievalPlan,
        *,
        clues: Sequence[str] = (),
        raw: dict[str, str] | None = None,
        warnings: Sequence[str] = (),
        max_tokens: int | None = None,
        draft: str = "",
    ) -> Answer:
        """The read step the retrieval modes share: `plan` is executed (every query retrieves, the
        lists are fused or unioned; `memorag.modes.evidence_plan`), fitted to the budget
        (`max_tokens`) and then to the generator's window, the weakest cut first, or, for a plan
        read whole (`plan.budgeted` False, the reference rule), to the window with the clues' hits
        cut first; the answer prompt over the evidence, in `evidence_order()`, with `draft` offered
        after it ("The answer might be ..."), is rendered and measured once and sent as measured. `clues` (the queries beyond the user's) and `raw` go into the `Answer` as they are."""
        step = context.evidence
        order = self.evidence_order(task) or "document"
        warnings = list(warnings)
        with timed(timings, "retrieve"):
            if plan.budgeted:
                ranking = step.gather(plan, task, query, language, max_tokens=max_tokens)
                prompt = step.fit_ranked(ranking, order, query, task, language, draft=draft)
            else:
                ranking = step.gather_whole(plan, task, query, language)
                prompt = step.fit_ranked(ranking, order, query, task, language, cut_order=clue_hits_first, draft=draft)
                warnings += step.cut_warnings(ranking, prompt.evidence)
        evidence = prompt.evidence
        hooks.evidence(evidence)
        with timed(timings, "generate"):
            text = step.generate(prompt, hooks.on_text)
        return Answer(query, task, self.name, text, list(clues), evidence, timings, context.generator.name,
                      dict(raw or {}), warnings=warnings, offered_draft=draft)


_MODES: dict[str, type[Mode]] = {}


def register_mode(cls: type[Mode]) -> type[Mode]:
    """Class decorator: make a `Mode` available by its `name`."""
    if not getattr(cls, "name", None) or not getattr(cls, "tasks", None) or cls.default_task not in cls.tasks:
        raise TypeError(f"{cls.__name__} needs a name, tasks, and a default_task among its tasks")
    _MODES[cls.name] = cls
    return cls


def mode_modules() -> list[str]:
    """The modules of this package, where the built-in modes live; each registers its modes
    itself (`@register_mode`, the one place a mode is named)."""
    package = __name__.rpartition(".")[0]
    return sorted(f"{package}.{info.name}" for info in pkgutil.iter_modules(importlib.import_module(package).__path__))


def _import_mode_modules() -> None:
    for module in mode_modules():
        importlib.import_module(module)


def available_modes() -> list[str]:
    _import_mode_modules()
    return sorted(_MODES)


def describe_modes(config: Any) -> list[dict[str, str | None]]:
    """Each available mode in words, under the pipeline's `config` (a `PipelineConfig`): its `name`,
    its one-line `description`, what its evidence's `score` means, and the `order` its evidence is
    listed in (as the generator reads it; None when it retrieves nothing to order)."""
    described = []
    for name in available_modes():
        mode = _MODES[name]
        order = mode(config.evidence_order).evidence_order()
        described.append({"name": name, "description": mode.description, "score": mode.score_meaning(config),
                          "order": ORDER_WORDS[order] if order else None})
    return described


def get_mode(name: str) -> type[Mode]:
    _import_mode_modules()
    if name not in _MODES:
        raise UnknownModeError(f"unknown mode {name!r}; available modes: {', '.join(sorted(_MODES))}")
    return _MODES[name]
