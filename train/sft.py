"""Stage 2: fine-tune the memory model to write clues (clue SFT;
docs/training.md).

    accelerate launch train/sft.py --config configs/sft/smollm2.yaml \\
        model.memory_weights=runs/pretrain-smollm2/final \\
        data.files=[data/clues.jsonl]
    python train/sft.py --config configs/debug-sft.yaml  # one process

Samples are JSONL lines {"context", "instruction", "target"}
(memorag/training/data/sft.py); make them with train/build_clue_data.py.
`--help` lists every setting.
"""

import sys

from memorag.training.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main("sft", description=__doc__))
