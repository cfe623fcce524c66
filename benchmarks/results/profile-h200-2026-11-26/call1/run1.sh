#!/usr/bin/env bash
# The first device call of 2026-11-26: profiles of a training step (135M and 7B shapes) and of a 7B memorize,
# and the 135M training step at larger batches.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi > "$O/nvidia-smi.txt" 2>&1
C=(--device cuda --dtype bf16)
T=(--windows 1024 --tokens 16384 --stages pretrain --memory-rank 0 --steps 2)
timeout 70 python3 benchmarks/train.py "${C[@]}" "${T[@]}" --shape smollm2-135m --batches 4 --profile \
  --json "$O/train-135m-profile.json" > "$O/train-135m-profile.log" 2>&1; echo "train-135m-profile rc $?"
timeout 80 python3 benchmarks/train.py "${C[@]}" "${T[@]}" --shape smollm2-135m --batches 16 32 \
  --json "$O/train-135m-batches.json" > "$O/train-135m-batches.log" 2>&1; echo "train-135m-batches rc $?"
timeout 90 python3 benchmarks/train.py "${C[@]}" "${T[@]}" --shape qwen2-7b --batches 1 --profile \
  --json "$O/train-7b-profile.json" > "$O/train-7b-profile.log" 2>&1; echo "train-7b-profile rc $?"
timeout 60 python3 benchmarks/memorize.py "${C[@]}" --shape qwen2-7b --lengths 32768 --ratios 4 --plain-max 0 \
  --profile --out "$O/memorize-7b-profile.json" > "$O/memorize-7b-profile.log" 2>&1; echo "memorize-7b rc $?"
grep -h "^| pretrain\|^| memorize" "$O"/*.log
