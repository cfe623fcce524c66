"""Build the pretraining mixture a config's `data.mixture` shares describe, into its `data.files[0]`.

    bash train/prepare_kjv.sh                                   # the KJV without the held-out books
    python train/prepare_mix.py --config configs/pretrain/smollm2-mix-cpu.yaml
    python train/prepare_mix.py --config configs/pretrain/smollm2-mix-cpu.yaml --chars 2000000   # smaller

Writes `mix_train.jsonl`, `mix_manifest.json` and the held-out pieces (`wiki_heldout.jsonl`,
`essays_heldout.jsonl`) beside `data.files[0]` (memorag/training/data/mixture.py).
"""

import argparse
import json
import sys
from pathlib import Path

from memorag.config import load_config
from memorag.training.config import TrainConfig
from memorag.training.data.mixture import build_mixture


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="a pretraining config with data.mixture and data.files")
    parser.add_argument("--chars", type=int, default=12_000_000, help="characters in all (about 4 per token)")
    parser.add_argument("--kjv", default="runs/data/kjv/kjv_train.txt", help="train/prepare_kjv.sh's output")
    parser.add_argument("--synthetic-tokens", type=int, default=3000, help="length of each generated document")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the config")
    args = parser.parse_args()
    cfg = load_config(TrainConfig, args.config, args.overrides)
    if not cfg.data.mixture or len(cfg.data.files) != 1 or not cfg.data.files[0].endswith("mix_train.jsonl"):
        print("error: the config needs data.mixture (shares) and data.files = [DIR/mix_train.jsonl]", file=sys.stderr)
        return 2
    out_dir = Path(cfg.data.files[0]).parent
    manifest = build_mixture(out_dir, cfg.data.mixture, args.chars, args.kjv, seed=cfg.seed,
                             synthetic_tokens=args.synthetic_tokens)
    print(json.dumps(manifest["shares_actual"]), f"-> {out_dir / 'mix_train.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
