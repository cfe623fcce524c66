#!/usr/bin/env bash
# Device call 3: the CUDA tests of compiled windows (the first call's failed on the test's own setup: it
# memorized with fp32 memory parameters outside autocast), then memorize at 16K and 64K tokens, eager
# layers and compiled windows, for the before/after table's other lengths.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
exec > >(tee "$OUT/run.log") 2>&1
nvidia-smi -L
step() {
    local name=$1 limit=$2; shift 2
    echo "== $name ($(date +%T))"
    timeout "$limit" "$@" || echo "== $name FAILED (rc $?)"
}
step pytest-cuda 100 python3 -m pytest -q -p no:cacheprovider -m cuda tests/memory/test_compiled_windows.py
M7=(--device cuda --dtype bf16 --shape qwen2-7b --lengths 16384 65536 --ratios 4 --plain-max 0)
step memorize-7b-eager 80 python3 benchmarks/memorize.py "${M7[@]}" --out "$OUT/memorize-7b-16k-64k-eager.json"
step memorize-7b-compiled 100 python3 benchmarks/memorize.py "${M7[@]}" --compile-windows --out "$OUT/memorize-7b-16k-64k-compiled.json"
echo "== done ($(date +%T))"
