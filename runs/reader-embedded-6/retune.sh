#!/bin/bash
# A measured alternative, not shipped: the sixth run's margin tuned again with the margin acting on the fixed
# reply's first token in either case, with or without a leading space (LocalGenerator.refusal_tokens of commit
# 99426c3, which this script needs; the package's margin acts on "Not" alone, which the reader sidesteps by
# writing "not in the evidence."): the same samples and objective as after.sh, then the held-out rag cells of
# that reader (seed 1, the same questions; the base model's cells are those of runs/reader-heldout-6-seed1)
# and first contact. Run at 99426c3 it wrote retune.out, tune/margins-hotpotqa-either-case.json,
# runs/reader-heldout-6-either-case-seed1/ and first-contact-either-case.txt (docs/training.md, "The refusal
# margin"); the package's reader_decoding.json was then restored.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=memorag/weights/reader-smollm2-135m-instruct
R=runs/reader-embedded-6
H=runs/reader-heldout-6-either-case-seed1
if ! .venv/bin/python -c "from memorag.generation import LocalGenerator; LocalGenerator.refusal_tokens" 2>/dev/null; then
  echo "error: this checkout's margin acts on 'Not' alone; run this script at commit 99426c3 (git switch --detach 99426c3)" >&2
  exit 2
fi
TRAINED="runs/reader-embedded/data/hotpotqa.jsonl runs/reader-embedded/data/sentence.jsonl runs/reader-embedded/data/squad.jsonl runs/reader-embedded-3/data/sentence.jsonl runs/reader-embedded-3/data/squad-answerable.jsonl runs/reader-embedded-3/data/squad-unanswerable.jsonl runs/reader-embedded-5/data/hotpotqa-twins.jsonl runs/reader-embedded-5/data/squad-twins.jsonl"
uptime
.venv/bin/python train/tune_refusal.py --objective hotpotqa_dev_longctx --adapter $R/final \
  --samples runs/reader-embedded-4/tune/hotpotqa-8k.jsonl runs/reader-embedded-4/tune/squad-4k.jsonl \
  --exclude-ids-of $TRAINED --out $R/tune/margins-hotpotqa-either-case.json --write --no-progress
cp $R/final/reader_decoding.json $W/reader_decoding.json
cat $W/reader_decoding.json
.venv/bin/python eval/run.py --config configs/eval/reader-heldout.yaml out_dir=$H seed=1 \
  'modes=["rag@embedded"]' 'lengths=[4096,8192]'
.venv/bin/python eval/paired.py runs/reader-heldout-6-seed1:rag $H:rag@embedded --out $H/paired-rag-either-case
.venv/bin/python eval/paired.py runs/reader-heldout-6-seed1:rag@embedded $H:rag@embedded \
  --out $H/paired-first-token-against-either-case
bash $R/first-contact.sh > $R/first-contact-either-case.txt 2>&1
