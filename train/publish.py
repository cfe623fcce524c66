"""Publish memory weights (a training run's `final/` or `checkpoint-N/`) on the Hugging Face hub with a model card.

    python train/publish.py --weights runs/sft-smollm2/final --repo you/smollm2-memory \\
        [--eval runs/sft-smollm2/eval/step-1000.json] [--license apache-2.0] [--private]
    python train/publish.py --weights runs/sft-smollm2/final --repo you/smollm2-memory --card-only card.md

Log in first with `hf auth login` (or set HF_TOKEN). `--card-only` writes the filled card
and uploads nothing. The card and the upload are memorag/training/publish.py.
"""

import argparse
import json
import sys
from pathlib import Path

from memorag.training.publish import model_card, publish_memory_weights


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", required=True, help="folder with memory_config.json and memory_weights.safetensors")
    parser.add_argument("--repo", required=True, help="hub repository id, owner/name (created if missing)")
    parser.add_argument("--eval", help="held-out evaluation JSON (train/evaluate.py --out) to show in the card")
    parser.add_argument("--license", help="license id for the card's metadata, e.g. apache-2.0")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--card-only", metavar="PATH", help="write the filled card to PATH and upload nothing")
    args = parser.parse_args(argv)
    report = json.loads(Path(args.eval).read_text(encoding="utf-8")) if args.eval else None
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
