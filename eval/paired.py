"""Two evaluation runs (or two modes of one) compared question by question, with 95% bootstrap intervals.

    python eval/paired.py runs/eval/reader-heldout-base runs/eval/reader-heldout --out OUT
    python eval/paired.py runs/eval/reader-heldout:rag runs/eval/reader-heldout:memorag --out OUT

A side is a folder eval/run.py wrote (its examples.jsonl) or FOLDER:MODE, one mode of it. Questions
pair by task, length and example id (and by mode when neither side names one); per cell: each
side's score, B - A, how many questions B answered better, worse and the same, the share each
answered, and for SQuAD v2 the answerable F1 and the unanswerable no-answer share
(memorag/evaluation/paired.py). Prints the markdown table; with --out writes OUT.md and OUT.json.
"""

import argparse
import sys

from memorag.evaluation.paired import Side, compare, markdown, write


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="side A: FOLDER or FOLDER:MODE")
    parser.add_argument("b", help="side B: FOLDER or FOLDER:MODE")
    parser.add_argument("--out", help="write OUT.md and OUT.json")
    args = parser.parse_args()
    try:
        result = compare(Side.parse(args.a), Side.parse(args.b))
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    print(markdown(result), end="")
    if args.out:
        write(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
