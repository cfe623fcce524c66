"""The reader: fine-tune a LoRA adapter on the generator to answer from the pipeline's own answer
prompts, with a short span, or `NO_ANSWER_REPLY` when the evidence lacks the answer
(docs/training.md, "The reader").

    python train/build_reader_data.py --out runs/data/reader/train.jsonl
    accelerate launch train/reader.py --config configs/reader/embedded.yaml [key=value ...]
    python train/reader.py --config configs/reader/embedded.yaml optim.stop_at_step=50  # one process
    python train/reader.py --config configs/reader/embedded.yaml                        # resumes

Samples are JSONL lines {"prompt", "system", "target"} (memorag/training/data/reader_samples.py).
`--help` lists every setting; checkpoints, `latest`, `train_log.jsonl` and `final/` go to
checkpoint.output_dir.
"""

import sys

from memorag.training.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main("reader", description=__doc__))
