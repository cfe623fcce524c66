#!/bin/bash
# The sixth run, once trained: its adapter cast to bfloat16 into the package, its margin tuned on tuning rows,
# the held-out cells (seed 1, the fifth run's fresh draw, both readers on this machine), and first contact.
set -euo pipefail
cd /work/main
W=memorag/weights/reader-smollm2-135m-instruct
R=runs/reader-embedded-6
.venv/bin/python - <<'PY'
import shutil
import torch
from safetensors.torch import load_file, save_file
state = load_file("runs/reader-embedded-6/final/adapter_model.safetensors")
save_file({k: v.to(torch.bfloat16).contiguous() for k, v in state.items()},
          "memorag/weights/reader-smollm2-135m-instruct/adapter_model.safetensors")
shutil.copy("runs/reader-embedded-6/final/adapter_config.json", "memorag/weights/reader-smollm2-135m-instruct/")
shutil.copy("runs/reader-embedded-6/train_config.yaml", "memorag/weights/reader-smollm2-135m-instruct/")
PY
ls -l $W
mkdir -p $R/tune
TRAINED="runs/reader-embedded/data/hotpotqa.jsonl runs/reader-embedded/data/sentence.jsonl runs/reader-embedded/data/squad.jsonl runs/reader-embedded-3/data/sentence.jsonl runs/reader-embedded-3/data/squad-answerable.jsonl runs/reader-embedded-3/data/squad-unanswerable.jsonl runs/reader-embedded-5/data/hotpotqa-twins.jsonl runs/reader-embedded-5/data/squad-twins.jsonl"
.venv/bin/python train/tune_refusal.py --objective hotpotqa_dev_longctx --adapter $R/final \
  --samples runs/reader-embedded-4/tune/hotpotqa-8k.jsonl runs/reader-embedded-4/tune/squad-4k.jsonl \
  --exclude-ids-of $TRAINED --out $R/tune/margins-hotpotqa.json --write --no-progress
cp $R/final/reader_decoding.json $W/reader_decoding.json
cat $W/reader_decoding.json
.venv/bin/python eval/run.py --config configs/eval/reader-heldout.yaml out_dir=runs/reader-heldout-6-seed1 seed=1 \
  'modes=[rag,"rag@embedded"]' 'lengths=[4096,8192]'
.venv/bin/python eval/paired.py runs/reader-heldout-6-seed1:rag runs/reader-heldout-6-seed1:rag@embedded \
  --out runs/reader-heldout-6-seed1/paired-rag-sixth-run
bash $R/first-contact.sh > $R/first-contact.txt 2>&1
uptime > $R/price.out; OMP_NUM_THREADS=2 .venv/bin/python benchmarks/reader_price.py --rounds 5 --json $R/reader_price.json >> $R/price.out 2>&1
