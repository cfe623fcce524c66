"""Run the evaluation harness: modes x tasks x context lengths -> JSON lines, markdown tables, plots.

The protocol (tasks, metrics, recall, the held-out split, the records) is docs/evaluation.md.

    python eval/run.py --config configs/eval/smoke.yaml
    python eval/run.py --config configs/eval/cpu-hour.yaml out_dir=runs/eval/cpu-hour2 modes=[rag,memorag]
    python eval/run.py --config configs/eval/smoke.yaml num_examples=1 progress=false
    python eval/run.py --help       # this text and every setting (key=value overrides, dotted for sections)

Results go to `out_dir`: examples.jsonl (one record per question and mode), cells.jsonl (one
summary per mode x task x length), results.md (tables), plots/*.png and config.yaml (the
resolved settings). A rerun over the same out_dir resumes: finished cells and recorded
examples are skipped. The logic lives in memorag.evaluation.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time

from memorag.config import ConfigError, format_config_help
from memorag.evaluation import EvalConfig, EvalError, load_eval_config, run_evaluation
from memorag.evaluation.store import ResultsMismatchError
from memorag.placement import Placement


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, epilog=format_config_help(EvalConfig),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="a YAML file of settings (configs/eval/*.yaml)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="settings over the file's")
    options = parser.parse_args(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    try:
        config = load_eval_config(options.config, options.overrides)
        Placement.of(config.pipeline)  # a GPU or a quantization this machine cannot give fails before any work
        cells, report = run_evaluation(config, command=shlex.join(["python", "eval/run.py", *args]))
    except (ConfigError, EvalError, ResultsMismatchError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report.read_text(encoding="utf-8"))
    print(f"{len(cells)} cells in {time.perf_counter() - started:.0f} s; results in {config.out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
