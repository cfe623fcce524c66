"""Held-out perplexity of later windows with the memory at several ratios, beside no memory and full context.

    python train/evaluate.py --config configs/pretrain/smollm2.yaml --out before.json
    python train/evaluate.py --config configs/pretrain/smollm2.yaml \\
        model.memory_weights=runs/pretrain-smollm2/final --out after.json

Uses the config's model, memory and eval sections (memorag/training/evaluate.py).
"""

import sys

from memorag.training.cli import evaluate_main

if __name__ == "__main__":
    sys.exit(evaluate_main())
