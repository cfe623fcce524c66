"""How an RLGF run's trained weights rank the preference pairs, against the weights the pairs were built from.

    python train/rank_rlgf_pairs.py --config configs/rlgf/smollm2-cpu.yaml precision=bf16 \
        --weights runs/rlgf-smollm2-cpu/final-bf16 --num-pairs 100 --out runs/rlgf-heldout/pair-ranking

Reads `--num-pairs` pairs of the config's data.files[0] (drawn by --seed) with the config's starting weights
(model.memory_weights) and with --weights, in the config's precision; the share of pairs whose chosen clue set
the trained weights rank higher than the starting ones did (DPO's implicit reward) says whether the run fitted
the pairs it trained on (memorag/training/rlgf_ranking.py). Writes OUT.json (per pair and summarized) and
prints the summary. Trailing key=value settings override the config's.
"""

import argparse
import json
import sys
from pathlib import Path

from memorag.config import ConfigError, load_config
from memorag.training.config import TrainConfig
from memorag.training.errors import TrainingInputError
from memorag.training.rlgf_ranking import rank_pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the stage rlgf config the run trained with")
    parser.add_argument("--weights", required=True, help="the trained memory weights (a final/ or published folder)")
    parser.add_argument("--num-pairs", type=int, default=100, help="pairs read (default 100; 0: all)")
    parser.add_argument("--seed", type=int, default=0, help="which pairs are drawn (default 0)")
    parser.add_argument("--out", help="OUT.json is written (default: print only)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="settings over the config's")
    args = parser.parse_intermixed_args()
    if args.num_pairs < 0:
        parser.error("--num-pairs must be 0 (all) or more")
    try:
        cfg = load_config(TrainConfig, args.config, args.overrides)
        result = rank_pairs(cfg, args.weights, args.num_pairs or None, args.seed)
    except (ConfigError, TrainingInputError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = {key: value for key, value in result.items() if key != "rows"}
    if args.out:
        out = Path(args.out).with_suffix(".json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
