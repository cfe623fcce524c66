"""Write generated long-context tasks (proxies) as JSON lines, one file per task and length.

    python eval/synthetic.py --tasks niah_single hashhop --lengths 8192 32768 --num-examples 20 --out data/synthetic
    python eval/synthetic.py --tasks all --lengths 8192 --tokenizer HuggingFaceTB/SmolLM2-135M-Instruct --out data/synthetic
    python eval/synthetic.py --tasks hashhop --option hops=3 --lengths 131072 --out data/synthetic
    python eval/synthetic.py --list

Each file is ``OUT/{task_name}_{length}.jsonl`` of ``EvalExample`` records
(``memorag.evaluation.datasets.schema.read_examples`` reads them back). Every example is
marked ``proxy=True``: scores on generated tasks are not comparable with
published benchmark figures. The generators live in ``memorag.evaluation.datasets.synthetic``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from memorag.evaluation.datasets.filler import FILLER_KINDS
from memorag.evaluation.datasets.lengths import TOKENS_PER_WORD
from memorag.evaluation.datasets.schema import write_examples
from memorag.evaluation.datasets.synthetic import SYNTHETIC_TASKS, generate_examples, task_options


def _parse_options(pairs: list[str]) -> dict[str, object]:
    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--option expects key=value, got {pair!r}")
        options[key] = yaml.safe_load(value)
    return options


def _load_tokenizer(name: str | None):
    if name is None:
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=["all"], help="task names, or 'all' (see --list)")
    parser.add_argument("--lengths", nargs="+", type=int, default=[8192], help="context lengths in tokens")
    parser.add_argument("--num-examples", type=int, default=10, help="examples per task and length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("data/synthetic"), help="output folder")
    parser.add_argument(
        "--filler", choices=FILLER_KINDS, default="kjv", help="haystack text (default: KJV Bible)"
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="measure exactly with this tokenizer (path or hub id); default: approx",
    )
    parser.add_argument(
        "--tokens-per-word", type=float, default=TOKENS_PER_WORD, help="approximate length factor"
    )
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="task option (repeatable)"
    )
    parser.add_argument("--list", action="store_true", help="list the tasks and their options, then exit")
    args = parser.parse_args(argv)

    if args.list:
        for name, builder in SYNTHETIC_TASKS.items():
            print(
                f"{name:18s} {(builder.__doc__ or '').strip().splitlines()[0]}  options: {task_options(name)}"
            )
        return 0
    tasks = list(SYNTHETIC_TASKS) if args.tasks == ["all"] else args.tasks
    unknown = [task for task in tasks if task not in SYNTHETIC_TASKS]
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(SYNTHETIC_TASKS)}")
    options = _parse_options(args.option)
    unused = sorted(set(options) - {key for task in tasks for key in task_options(task)})
    if unused:
        parser.error(f"no selected task takes the option(s) {', '.join(unused)}")
    tokenizer = _load_tokenizer(args.tokenizer)
    for task in tasks:
        task_specific = {key: value for key, value in options.items() if key in task_options(task)}
        for length in args.lengths:
            examples = generate_examples(
                task,
                args.num_examples,
                length,
                seed=args.seed,
                tokenizer=tokenizer,
                tokens_per_word=args.tokens_per_word,
                filler=args.filler,
                **task_specific,
            )
            name = examples[0].task if examples else f"synthetic_{task}"
            path = write_examples(args.out / f"{name}_{length}.jsonl", examples)
            print(f"{path}: {len(examples)} examples (proxy)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
