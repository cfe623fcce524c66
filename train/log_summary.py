"""A training run's per-step metrics over ranges of steps, with 95% bootstrap intervals over the steps.

    python train/log_summary.py --log runs/rlgf-smollm2-cpu/train_log.jsonl \
        --metrics loss reward_accuracy --percent reward_accuracy \
        --ranges all 1-140 141-279 last:50 last:20 --out runs/rlgf-smollm2-cpu/log_summary

Writes OUT.md (the command and a table) and OUT.json (the command and the rows, with the bootstrap's samples and
seed), and prints the table
(memorag/training/log_summary.py).
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

from memorag.training.log_summary import summarize, summary_table
from memorag.training.monitor import read_log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log", required=True, help="a run's train_log.jsonl")
    parser.add_argument("--metrics", nargs="+", default=["loss"], help="logged per-step metrics (default: loss)")
    parser.add_argument("--percent", nargs="*", default=[], help="metrics shown multiplied by 100")
    parser.add_argument("--ranges", nargs="+", default=["all"],
                        help="step ranges: all, FIRST-LAST or last:N (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default: 0)")
    parser.add_argument("--out", help="OUT.md and OUT.json are written (default: print only)")
    args = parser.parse_args()
    if not Path(args.log).is_file():
        parser.error(f"--log {args.log}: no such file (a run writes train_log.jsonl in its output_dir)")
    try:
        rows = summarize(read_log(args.log, event="train"), args.metrics, args.ranges, args.percent, args.seed)
    except ValueError as error:
        parser.error(str(error))
    table = summary_table(rows, args.metrics, args.percent)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        command = shlex.join(["python", "train/log_summary.py", *sys.argv[1:]])
        out.with_suffix(".md").write_text(f"`{command}`\n\n{table}\n", encoding="utf-8")
        record = {"command": command, "log": args.log, "metrics": args.metrics, "percent": args.percent, "rows": rows}
        out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
