"""The evaluation harness: every mode on the same tasks, metrics and budgets.

    from memorag.evaluation import load_eval_config, run_evaluation
    cells, report = run_evaluation(load_eval_config("configs/eval/smoke.yaml"))

Modules: ``config`` (the run's typed settings), ``sources`` (where examples come
from), ``runner`` (the loop: memorize once per context, ask in every mode),
``recall`` (recall of gold evidence, defined there), ``scoring`` (the example's
metric), ``measure`` (generator tokens, peak memory per stage), ``store``
(resumable JSON lines), ``summary`` (a cell from its records), ``report`` and
``plots`` (markdown tables, PNGs), ``clue_recall`` (clue-driven against
query-only retrieval for a trained memory checkpoint).
"""

from memorag.evaluation.config import EvalConfig, TaskSpec, load_eval_config
from memorag.evaluation.runner import EvalError, EvalRunner, Models, run_evaluation

__all__ = ["EvalConfig", "EvalError", "EvalRunner", "Models", "TaskSpec", "load_eval_config", "run_evaluation"]
