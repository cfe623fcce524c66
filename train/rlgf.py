"""Stage 3, RLGF: train the memory's clues by the answers they lead to, with DPO on recorded preference
pairs (docs/training.md, "Stage 3: clues trained by their answers (RLGF)").

    python train/build_rlgf_pairs.py --config configs/rlgf/smollm2-cpu.yaml       # the pairs (resumable)
    accelerate launch train/rlgf.py --config configs/rlgf/smollm2-cpu.yaml [key=value ...]
    python train/rlgf.py --config configs/debug-rlgf.yaml                           # one process, seconds
    python train/rlgf.py --config configs/rlgf/smollm2-cpu.yaml optim.stop_at_step=50   # then again: resumes

A pair is a JSONL line of train/build_rlgf_pairs.py (memorag/training/rlgf_pairs.py); model.memory_weights
must be the weights the pairs were built from (the SFT checkpoint). `--help` lists every setting;
checkpoints, `latest`, `train_log.jsonl` and `final/` go to checkpoint.output_dir.
"""

import sys

from memorag.training.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main("rlgf", description=__doc__))
