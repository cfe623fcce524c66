"""Run the evaluation harness: modes x tasks x context lengths -> JSON lines,
markdown tables, plots. The protocol (tasks, metrics, recall, the held-out
split, the records) is docs/evaluation.md.

    python eval/run.py --config configs/eval/smoke.yaml
    python eval/run.py --config configs/eval/cpu-hour.yaml \\
        out_dir=runs/eval/cpu-hour2 modes=[rag,memorag]
    python eval/run.py --config configs/eval/smoke.yaml num_examples=1
    python eval/run.py --help  # this text and every setting (key=value)

On several GPUs or machines, split the questions into N disjoint parts and
join them after (the shards run anywhere, in any order):

    python eval/run.py --config configs/eval/paper-7b.yaml shard=0/4
    accelerate launch --multi_gpu --num_processes 4 \\
        eval/run.py --config configs/eval/paper-7b.yaml  # a part per GPU
    sbatch --array=0-3 slurm/eval.sbatch configs/eval/paper-7b.yaml
    python eval/run.py --config configs/eval/paper-7b.yaml --merge

A shard writes out_dir/shards/I-of-N/ and resumes like a whole run; under
accelerate launch (or torchrun) each process takes the part of its RANK of
WORLD_SIZE and, with pipeline.device=cuda, the GPU of its LOCAL_RANK. The
merge (with the same overrides as the shards) writes the files below as an
unsharded run would, or names the shards that are missing or unfinished.

Results go to `out_dir`: examples.jsonl (one record per question and mode),
cells.jsonl (one summary per mode x task x length), results.md (tables),
plots/*.png and config.yaml (the resolved settings). A rerun over the same
out_dir resumes: finished cells and recorded examples are skipped. The logic
lives in memorag.evaluation.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time

from memorag.config import ConfigError, format_config_help
from memorag.evaluation import EvalConfig, EvalError, load_eval_config, run_evaluation
from memorag.evaluation.merge import merge_shards
from memorag.evaluation.results_store import ResultsMismatchError
from memorag.evaluation.shards import local_device, shard_from_environment
from memorag.runtime.placement import Placement


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, epilog=format_config_help(EvalConfig),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="a YAML file of settings (configs/eval/*.yaml)")
    parser.add_argument("--merge", action="store_true",
                        help="join the shards in out_dir/shards/ into out_dir (no model is loaded)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="settings over the file's")
    options = parser.parse_intermixed_args(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    command = shlex.join(["python", "eval/run.py", *args])
    try:
        config = load_eval_config(options.config, options.overrides)
        if options.merge:
            cells, report = merge_shards(config, command=command)
        else:
            apply_launcher(config)
            Placement.of(config.pipeline)  # a GPU or a quantization this machine cannot give fails before any work
            cells, report = run_evaluation(config, command=command)
    except (ConfigError, EvalError, ResultsMismatchError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report.read_text(encoding="utf-8"))
    print(f"{len(cells)} cells in {time.perf_counter() - started:.0f} s; results in {report.parent}", file=sys.stderr)
    return 0


def apply_launcher(config: EvalConfig) -> None:
    """One shard per process when a launcher started several (RANK of WORLD_SIZE), on its own GPU."""
    shard = shard_from_environment()
    if shard is None:
        return
    if config.shard is not None:
        raise ConfigError(f"shard={config.shard} was given, but the launcher started {shard.count} processes, "
                          "each of which takes a shard of its own; drop shard= or launch one process")
    config.shard = str(shard)
    config.pipeline.device = local_device(config.pipeline.device)


if __name__ == "__main__":
    raise SystemExit(main())
