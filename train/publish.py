"""Publish memory weights (a training run's `final/` or `checkpoint-N/`) on the Hugging Face hub with a model card.

    python train/publish.py --weights runs/sft-smollm2/final --repo you/smollm2-memory \\
        [--eval runs/sft-smollm2/eval/step-1000.json] [--license apache-2.0] [--private]
    python train/publish.py --weights runs/sft-smollm2/final --repo you/smollm2-memory --card-only card.md

    python train/publish.py --weights runs/pretrain-smollm2-mix-cpu/final --to-folder memorag/weights/NAME \
        --run runs/pretrain-smollm2-mix-cpu --eval step-300.json      # a local folder, nothing uploaded

Log in first with `hf auth login` (or set HF_TOKEN). `--card-only` writes the filled card
and uploads nothing. `--to-folder` writes the weights, the card, each `--run`'s config and
train_log.jsonl and each `--eval` JSON into a local folder instead (how the shipped weights
are made). The card, the folder and the upload are memorag/training/publish.py.
"""

import argparse
import json
import sys
from pathlib import Path

from memorag.training.publish import model_card, publish_memory_weights, ship_memory_weights


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True, help="folder with memory_config.json and memory_weights.safetensors")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--repo", help="hub repository id, owner/name (created if missing)")
    where.add_argument("--to-folder", metavar="DIR", help="write a local folder instead of uploading")
    parser.add_argument("--eval", action="append", default=[],
                        help="evaluation JSON (train/evaluate.py --out; the first is shown in the card); "
                             "repeatable with --to-folder, which copies each")
    parser.add_argument("--name", help="--to-folder: the memory_weights= value the card tells users to load it by "
                                       "(default: the folder's name)")
    parser.add_argument("--dtype", choices=("bfloat16", "float16", "float32"),
                        help="--to-folder: store the weights in this precision (default: as saved)")
    parser.add_argument("--base", help="--to-folder: the base model to record (checked to have the recorded shape), "
                                       "when training read an exact copy of it from a folder, as a time-boxed GPU run does")
    parser.add_argument("--run", action="append", default=[],
                        help="--to-folder: a training run's output folder whose config and log to copy (repeatable)")
    parser.add_argument("--license", help="license id for the card's metadata, e.g. apache-2.0")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--card-only", metavar="PATH", help="write the filled card to PATH and upload nothing")
    args = parser.parse_args(argv)
    if args.to_folder:
        folder = ship_memory_weights(args.weights, args.to_folder, runs=args.run, eval_files=args.eval, name=args.name,
                                     dtype=args.dtype, base=args.base)
        print(f"wrote {folder}")
        return 0
    if args.run:
        parser.error("--run goes with --to-folder")
    report = json.loads(Path(args.eval[0]).read_text(encoding="utf-8")) if args.eval else None
    if args.card_only:
        card = model_card(args.weights, args.repo, eval_report=report, license_id=args.license)
        Path(args.card_only).write_text(card, encoding="utf-8")
        print(f"wrote {args.card_only}")
        return 0
    url = publish_memory_weights(args.weights, args.repo, private=args.private, eval_report=report,
                                 license_id=args.license)
    print(f"published {args.weights} as {args.repo}: {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
