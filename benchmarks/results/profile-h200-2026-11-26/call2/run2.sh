#!/usr/bin/env bash
# The second device call of 2026-11-26: the CUDA tests of the lower-right causal attention, memorize at the 7B
# shape with it and (the same script over the package of b277543 in before-tree/) without it, the training steps
# with it, and a profile of a short 7B training step.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"
C=(--device cuda --dtype bf16)
T=(--windows 1024 --stages pretrain --memory-rank 0)
PYTHONPATH=$PWD timeout 120 python3 -m pytest -q -p no:cacheprovider -m cuda tests/memory/test_lower_right_causal.py \
  tests/benchmarks/test_memorize_device.py tests/benchmarks/test_train_device.py tests/memory/test_compiled_step.py \
  > "$O/pytest-cuda.log" 2>&1; echo "pytest rc $?"; tail -3 "$O/pytest-cuda.log"
M=(--shape qwen2-7b --lengths 32768 131072 --ratios 4 --plain-max 0)
PYTHONPATH=$PWD timeout 100 python3 benchmarks/memorize.py "${C[@]}" "${M[@]}" --out "$O/memorize-7b.json" \
  > "$O/memorize-7b.log" 2>&1; echo "memorize-7b rc $?"
PYTHONPATH=$PWD/before-tree timeout 100 python3 benchmarks/memorize.py "${C[@]}" "${M[@]}" \
  --out "$O/memorize-7b-before.json" > "$O/memorize-7b-before.log" 2>&1; echo "memorize-7b-before rc $?"
PYTHONPATH=$PWD timeout 60 python3 benchmarks/train.py "${C[@]}" "${T[@]}" --shape qwen2-7b --batches 1 --tokens 16384 \
  --steps 2 --json "$O/train-7b.json" > "$O/train-7b.log" 2>&1; echo "train-7b rc $?"
PYTHONPATH=$PWD timeout 60 python3 benchmarks/train.py "${C[@]}" "${T[@]}" --shape smollm2-135m --batches 16 --tokens 16384 \
  --steps 2 --json "$O/train-135m.json" > "$O/train-135m.log" 2>&1; echo "train-135m rc $?"
PYTHONPATH=$PWD timeout 80 python3 benchmarks/train.py "${C[@]}" "${T[@]}" --shape qwen2-7b --batches 1 --tokens 4096 \
  --steps 1 --profile --json "$O/train-7b-profile.json" > "$O/train-7b-profile.log" 2>&1; echo "train-7b-profile rc $?"
grep -h "^| pretrain\|^| memorize\|again" "$O"/*.log
