"""Stage 1: pretrain the memory model on long raw text
(docs/training.md, docs/memory-model.md).

    accelerate launch train/pretrain.py \\
        --config configs/pretrain/smollm2.yaml [key=value ...]
    accelerate launch --config_file configs/accelerate/deepspeed_zero2.yaml \\
        train/pretrain.py --config configs/pretrain/qwen2-7b.yaml \\
        data.files=[/data/redpajama]
    python train/pretrain.py --config configs/debug.yaml  # one process

`python train/pretrain.py --help` lists every setting
(memorag/training/config.py). Checkpoints, `latest`, `train_log.jsonl` and
`final/` go to checkpoint.output_dir.
"""

import sys

from memorag.training.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main("pretrain", description=__doc__))
