#!/usr/bin/env bash
# The third device call of 2026-11-26: a training step at both shapes with the package as committed (flash
# attention's lower-right causal mask while autograd records) and with b277543's (before-tree/: the boolean mask),
# alternating on one machine, and the CUDA test of the lower-right path.
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"
C=(--device cuda --dtype bf16 --windows 1024 --stages pretrain --memory-rank 0 --tokens 16384 --steps 2)
PYTHONPATH=$PWD timeout 35 python3 -m pytest -q -p no:cacheprovider -m cuda tests/memory/test_lower_right_causal.py \
  > "$O/pytest-cuda.log" 2>&1; echo "pytest rc $?"; tail -1 "$O/pytest-cuda.log"
for shape in smollm2-135m qwen2-7b; do
  batch=16; [ $shape = qwen2-7b ] && batch=1
  PYTHONPATH=$PWD/before-tree timeout 45 python3 benchmarks/train.py "${C[@]}" --shape $shape --batches $batch \
    --json /tmp/unused.json > "$O/train-$shape-before.log" 2>&1; echo "$shape before rc $?"
  PYTHONPATH=$PWD timeout 45 python3 benchmarks/train.py "${C[@]}" --shape $shape --batches $batch \
    --json "$O/train-$shape.json" > "$O/train-$shape.log" 2>&1; echo "$shape after rc $?"
done
grep "^| pretrain" "$O"/*.log
