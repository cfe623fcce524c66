"""The context gain against tokens trained, from a memory's committed evaluations: a table, JSON and PNG.

    python train/gain_curve.py --curve memorag/weights/memory-smollm2-135m-instruct/eval/curve.json \
        --runs memorag/weights/memory-smollm2-135m-instruct/training_runs --ratios 2 4 8 \
        --out memorag/weights/memory-smollm2-135m-instruct/eval/gain-curve.md

Writes OUT.md, OUT.json and OUT.png (OUT may end in .md) (memorag/training/gain_curve.py).
"""

import argparse
import json
import sys
from pathlib import Path

from memorag.training.gain_curve import curve_json, curve_table, load_curve, plot_curve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--curve", required=True, help="the curve spec: evaluations and the [run, step] they measured")
    parser.add_argument("--runs", required=True, help="the folder of the runs' train_log.jsonl")
    parser.add_argument("--ratios", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--out", required=True, help="OUT.md, OUT.json and OUT.png are written")
    args = parser.parse_args()
    points = load_curve(args.curve, args.runs)
    table = curve_table(points, args.ratios)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(curve_json(points), indent=2) + "\n", encoding="utf-8")
    plot_curve(points, args.ratios, out.with_suffix(".png"))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
