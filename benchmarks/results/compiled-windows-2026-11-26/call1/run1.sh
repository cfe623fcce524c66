#!/usr/bin/env bash
# Device call 1: training and memorizing at the 7B and 135M shapes, eager layers then compiled windows
# (MemoryModel.compile_windows), each in its own process, then the CUDA tests of compiled windows.
# Run from the tree's root with OUT set (the device tool's output folder); at most 8 files come back.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
exec > >(tee "$OUT/run.log") 2>&1
nvidia-smi
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
COMMON=(--device cuda --dtype bf16)
T7=(--shape qwen2-7b --windows 1024 --batches 1 --tokens 16384 --stages pretrain --memory-rank 0 --steps 2)
T135=(--shape smollm2-135m --windows 1024 --batches 16 --tokens 16384 --stages pretrain --memory-rank 0 --steps 2)
M7=(--shape qwen2-7b --lengths 32768 131072 --ratios 4 --plain-max 0)
step() {  # step NAME SECONDS COMMAND...: one benchmark under a time limit; a failure is printed and the call goes on
    local name=$1 limit=$2; shift 2
    echo "== $name ($(date +%T))"
    timeout "$limit" "$@" || echo "== $name FAILED (rc $?)"
}
step train-7b-eager 100 python3 benchmarks/train.py "${COMMON[@]}" "${T7[@]}" --json "$OUT/train-7b-eager.json"
step train-7b-compiled 200 python3 benchmarks/train.py "${COMMON[@]}" "${T7[@]}" --compile-windows --json "$OUT/train-7b-compiled.json"
step memorize-7b-eager 100 python3 benchmarks/memorize.py "${COMMON[@]}" "${M7[@]}" --out "$OUT/memorize-7b-eager.json"
step memorize-7b-compiled 150 python3 benchmarks/memorize.py "${COMMON[@]}" "${M7[@]}" --compile-windows --out "$OUT/memorize-7b-compiled.json"
step train-135m-eager 60 python3 benchmarks/train.py "${COMMON[@]}" "${T135[@]}" --json "$OUT/train-135m-eager.json"
step train-135m-compiled 100 python3 benchmarks/train.py "${COMMON[@]}" "${T135[@]}" --compile-windows --json "$OUT/train-135m-compiled.json"
step pytest-cuda 120 python3 -m pytest -q -p no:cacheprovider -m cuda tests/memory/test_compiled_windows.py \
    tests/benchmarks/test_train_device.py tests/benchmarks/test_memorize_device.py
echo "== done ($(date +%T))"
