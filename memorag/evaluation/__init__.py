"""The evaluation harness: every mode on the same tasks, metrics and budgets (docs/evaluation.md).

    from memorag.evaluation import load_eval_config, run_evaluation
    cells, report = run_evaluation(load_eval_config("configs/eval/smoke.yaml"))

Modules: ``config`` (the run's typed settings), ``example_sources`` (where examples come
from), ``runner`` (the loop: memorize once per context, ask in every mode),
``recall`` (recall of gold evidence, defined there), ``scoring`` (the example's
metric), ``measure`` (generator tokens, peak memory per stage), ``results_store``
(resumable JSON lines), ``summary`` (a cell from its records), ``report`` and
``plots`` (markdown tables, PNGs), ``clue_recall`` (clue-driven against
query-only retrieval for a trained memory checkpoint), ``metrics`` (the benchmarks'
scorers, re-implemented) and ``tasks`` (the examples: schema, builders over real
sets, generated tasks, original-format loaders).

The names below load on first use, so that importing a light module of the
package (``metrics``, ``tasks.schema``) does not load the models' libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memorag.evaluation.config import EvalConfig, TaskSpec, load_eval_config
    from memorag.evaluation.runner import EvalError, EvalRunner, Models, run_evaluation

_EXPORTS = {
    "EvalConfig": "config",
    "TaskSpec": "config",
    "load_eval_config": "config",
    "EvalError": "runner",
    "EvalRunner": "runner",
    "Models": "runner",
    "run_evaluation": "runner",
}

__all__ = ["EvalConfig", "EvalError", "EvalRunner", "Models", "TaskSpec", "load_eval_config", "run_evaluation"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'memorag.evaluation' has no attribute {name!r}")
    return getattr(importlib.import_module(f"memorag.evaluation.{_EXPORTS[name]}"), name)
