#!/usr/bin/env bash
# Device call 2: the three clue prompts as one batch over a 32K-token memory at the 7B shape, eager and
# through the compiled step replayed as CUDA graphs (the 150 tokens/s target).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
exec > >(tee "$OUT/run.log") 2>&1
nvidia-smi -L
echo "== decode-7b ($(date +%T))"
timeout 400 python3 benchmarks/decode.py --device cuda --dtype bf16 --shape qwen2-7b --memory-tokens 32768 \
    --new-tokens 32 --compile reduce-overhead --variants batch compiled-batch --json "$OUT/decode-7b.json" \
    || echo "== decode-7b FAILED (rc $?)"
echo "== done ($(date +%T))"
