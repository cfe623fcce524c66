#!/usr/bin/env bash
# The GPU set: decoding, memorize and training on one CUDA GPU, random weights of the SmolLM2-135M and
# Qwen2-7B shapes (memorag/benchmarking/shapes.py: nothing is downloaded), every JSON and log in OUT.
#
#   benchmarks/gpu.sh OUT [BEFORE]          # or: make bench-gpu OUT=... [BEFORE=...]
#
# OUT: the folder to write into (e.g. the device tool's $OUT). BEFORE (optional): a path to another
# checkout of this project (at or after the commit that added this script, e.g. today's main for a
# before/after table); the same commands then run in it too, alternating set by set, into OUT/before/.
# Nothing is fetched: BEFORE must already be on the machine. The shapes: window 1024, ratio 4, decoding
# over a 32K-token memory, memorize 16K-128K tokens, a training step on 16K tokens. On one H100 the
# decode and memorize steps took about 500 s (each compiled decoding step compiles for about 90 s) and
# the training steps and CUDA tests about 3 minutes more: where one command may run 10 minutes, run
# ONLY="decode-135m decode-7b memorize-135m memorize-7b" first and ONLY="train-135m train-7b pipeline"
# second; a tree with compiled windows adds memorize-7b-compiled, train-135m-compiled and train-7b-compiled
# (about 3 minutes more on an H200: run them in a third command). PYTHON picks the interpreter (default
# python3); the package
# is imported from the checkout (PYTHONPATH), so no install is needed where torch and transformers are.
# A device budget of 15 minutes (the machine's start included) holds part of the set only. The points
# not yet measured on an H100 (the compiled clue batch, compiled windows' memorize and training steps)
# are ONLY="decode-7b memorize-7b-compiled train-7b-compiled train-135m-compiled" (not yet run as one
# command, so its time is not measured; the H200 runs' parts of it: results/benchmarks/compiled-windows-2026-11-26/).
# The 135M training steps run 1, 4 and 16 sequences per step (16 is where 50,000 tokens/s held).
# DRY_RUN=1 prints the benchmark commands instead of running them (tests/benchmarks/test_gpu_set.py).
# ONLY="decode-7b memorize-7b" runs only the steps named (the names of the logs below) in both trees.
# A tree that is no git checkout (an exported copy) names its revision in a file REVISION at its root.
set -euo pipefail

OUT=${1:?usage: benchmarks/gpu.sh OUT [BEFORE]}
BEFORE=${2:-}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
COMMON=(--device cuda --dtype bf16)

run_set() {  # run_set TREE DEST: the GPU set with TREE's scripts, JSON and logs into DEST
    local tree=$1 dest=$2
    mkdir -p "$dest"
    if [ -f "$tree/REVISION" ]; then cat "$tree/REVISION"; else git -C "$tree" rev-parse HEAD 2>/dev/null || echo unknown; fi \
        > "$dest/revision.txt"
    step() {  # step NAME SCRIPT ARGS...: one benchmark, its output in NAME.log and NAME.json
        local name=$1 script=$2
        shift 2
        if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
        if [ -n "${DRY_RUN:-}" ]; then
            echo "$script ${COMMON[*]} $*"
            return
        fi
        echo "== $name ($tree)"
        # a failing step is recorded and the set goes on (one crash must not cost a time-boxed run the rest)
        PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$tree/benchmarks/$script" "${COMMON[@]}" "$@" \
            2>&1 | tee "$dest/$name.log" || echo "== $name FAILED (rc ${PIPESTATUS[0]}): see $dest/$name.log"
    }
    [ -n "${DRY_RUN:-}" ] || nvidia-smi > "$dest/nvidia-smi.txt" 2>&1 || true
    local compiled=()  # a tree with the compiled decoding step also decodes through it, as CUDA graphs
    if grep -q -- '"--compile"' "$tree/benchmarks/decode.py"; then compiled=(--compile reduce-overhead); fi
    step decode-135m decode.py --shape smollm2-135m --memory-tokens 32768 --new-tokens 32 "${compiled[@]}" \
        --json "$dest/decode-135m.json"
    step decode-7b decode.py --shape qwen2-7b --memory-tokens 32768 --new-tokens 32 "${compiled[@]}" \
        --json "$dest/decode-7b.json"
    step memorize-135m memorize.py --shape smollm2-135m --lengths 16384 32768 65536 131072 --ratios 4 \
        --plain-max 16384 --out "$dest/memorize-135m.json"
    step memorize-7b memorize.py --shape qwen2-7b --lengths 16384 32768 65536 131072 --ratios 4 \
        --plain-max 16384 --out "$dest/memorize-7b.json"
    step train-135m train.py --shape smollm2-135m --windows 1024 --batches 1 4 16 --tokens 16384 --stages pretrain \
        --memory-rank 0 --steps 2 --json "$dest/train-135m.json"
    step train-7b train.py --shape qwen2-7b --windows 1024 --batches 1 --tokens 16384 --stages pretrain \
        --memory-rank 0 --steps 2 --json "$dest/train-7b.json"
    if grep -q -- '"--compile-windows"' "$tree/benchmarks/memorize.py"; then  # a tree with compiled windows
        step memorize-7b-compiled memorize.py --shape qwen2-7b --lengths 16384 32768 65536 131072 --ratios 4 \
            --plain-max 0 --compile-windows --out "$dest/memorize-7b-compiled.json"
        step train-135m-compiled train.py --shape smollm2-135m --windows 1024 --batches 1 4 16 --tokens 16384 \
            --stages pretrain --memory-rank 0 --steps 2 --compile-windows --json "$dest/train-135m-compiled.json"
        step train-7b-compiled train.py --shape qwen2-7b --windows 1024 --batches 1 --tokens 16384 --stages pretrain \
            --memory-rank 0 --steps 2 --compile-windows --json "$dest/train-7b-compiled.json"
    fi
    if [ -n "${DRY_RUN:-}" ] || PYTHONPATH="$tree" "$PYTHON" -c "from memorag.generation.models import resolve_lm; resolve_lm(None)" >/dev/null 2>&1; then
        step pipeline pipeline.py --quick --out "$dest/pipeline.json"
    else
        echo "pipeline: skipped (the embedded models are not installed here)" | tee "$dest/pipeline.log"
    fi
}

started=$(date +%s)
run_set "$HERE" "$OUT"
if [ -n "$BEFORE" ]; then
    run_set "$(cd "$BEFORE" && pwd)" "$OUT/before"
fi
[ -n "${DRY_RUN:-}" ] && exit 0
[ -d "$HERE/tests" ] && PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest -q -p no:cacheprovider -m cuda \
    "$HERE/tests/benchmarks" "$HERE/tests/memory/test_compiled_step.py" 2>&1 | tee "$OUT/pytest-cuda.log" || true
echo "GPU set done in $(( $(date +%s) - started )) s; results in $OUT"
