"""Long-range QA samples for clue SFT: generated needles, variable tracking and bAbI facts.

    python train/build_longrange_sft.py --samples 2000 --out runs/data/sft/longrange_train.jsonl
    python train/build_longrange_sft.py --samples 200 --tokens 1024 2048 --tasks niah_single niah_multikey \
        --out small.jsonl

Each sample is a generated task's context, the `memorag:qa` mode's instruction with its question, and
its answers as the target, from seeds far from the evaluation's (memorag/training/data/longrange_sft.py). 2,000
samples took 20 s and 21 MB on 2 CPU cores (lengths counted approximately, in words). Mix it
into clue SFT beside the HotpotQA samples: `data.files=[runs/data/sft/hotpotqa_train_x1.jsonl,
runs/data/sft/longrange_train.jsonl]` (docs/training.md: "Long-range QA" under Data; docs/contributors/timeboxed-gpu-runs.md: "The next run").
"""

import argparse
import sys
from collections import Counter

from tqdm.auto import tqdm

from memorag.evaluation.datasets.synthetic import SYNTHETIC_TASKS
from memorag.training.data.longrange_sft import LONGRANGE_SEED, LONGRANGE_TASKS, build_samples
from memorag.training.data.sft import write_samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the JSONL to write")
    parser.add_argument("--samples", type=int, default=2000, help="how many samples (the tasks in turn)")
    parser.add_argument("--tokens", type=int, nargs="+", default=[2048, 3072],
                        help="context lengths in tokens, one drawn per sample (keep context, instruction and "
                             "target within the SFT config's data.max_length)")
    parser.add_argument("--tasks", nargs="+", default=list(LONGRANGE_TASKS), choices=sorted(SYNTHETIC_TASKS),
                        metavar="TASK", help=f"generated tasks, in turn (default: {' '.join(LONGRANGE_TASKS)}; "
                                             "hashhop needs --tokenizer to come out as long as asked)")
    parser.add_argument("--seed", type=int, default=0, help=f"generation seed {LONGRANGE_SEED} + SEED")
    parser.add_argument("--tokenizer", default="none",
                        help="count the context's tokens with this model's tokenizer (e.g. "
                             "embedded:smollm2-135m-instruct: exact, and seconds per sample); default 'none': "
                             "approximately, in words")
    args = parser.parse_args(argv)
    tokenizer = None
    if args.tokenizer != "none":
        from memorag.training.build import load_tokenizer

        tokenizer = load_tokenizer(args.tokenizer)
    with tqdm(total=args.samples, desc="samples") as bar:
        samples = build_samples(args.samples, args.tokens, args.tasks, args.seed, tokenizer=tokenizer,
                                progress=bar.update)
    write_samples(samples, args.out)
    counts = Counter(sample["task"] for sample in samples)
    print(f"wrote {len(samples)} samples to {args.out}: {dict(sorted(counts.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
