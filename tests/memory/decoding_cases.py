"""The decoding cases whose greedy token ids are pinned in data/decoding_golden.json.

The ids were recorded with the memory model's own decoding loop before decoding moved
to transformers' `generate` (`python -m tests.memory.decoding_cases --record`; the embedded case was
recorded again the same way, with the old loop, when the shipped weights changed, and once more on
2026-11-26 with today's decoding, when the GPU-trained weights were shipped, on an AMD EPYC with AVX2
and no AVX-512; and on 2026-11-28, on an Intel Xeon with AVX-512 and no AMX, when one SDPA call replaced
the CPU's split and folded attention, which moved the bf16 model's near-ties); the tests in test_decoding.py check that today's decoding reproduces them token for token.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from memorag.memory import MemoryModel

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "data" / "decoding_golden.json"
EXAMPLE = HERE.parents[1] / "examples" / "kjv_ruth_esther_jonah.txt"

# The embedded model: a memory of about 1.7K tokens (six 256-token windows compacted), whose
# last window is full enough that decoding crosses into the next window (compaction mid-decoding).
EMBEDDED_CONTEXT_CHARS = 6750
EMBEDDED_PROMPTS = (
    "Who were the two sons of Elimelech?",
    "Write three short questions whose answers are in the text, one per line.",
    "Where did Naomi go back to, and who went with her?",
)
EMBEDDED_NEW_TOKENS = 64

# Tiny random models (window 16, ratio 4): every decoding crosses several window boundaries.
TINY_CASES = (
    {"name": "llama-full", "family": "llama", "config": {}},
    {"name": "llama-step-expansion", "family": "llama", "config": {"attention": "step-expansion"}},
    {"name": "qwen3-segmentation", "family": "qwen3", "config": {"attention": "segmentation"}},
    {"name": "mistral-step-random", "family": "mistral",
     "config": {"ratios": [2, 4, 8], "ratio_mix": "step-random"}},
)
TINY_MEMORY = 45  # raw tokens memorized (2 windows compacted, 13 in the third)
TINY_PROMPTS = ((5, 7, 9), (11, 12, 13, 14, 15, 16, 17, 18, 19, 20), (30,))
TINY_NEW_TOKENS = 40


def tiny_model(case: dict) -> MemoryModel:
    from tests.memory.conftest import tiny_memory_model

    return tiny_memory_model(case["family"], seed=3, **case["config"])


def tiny_memory_ids() -> list[int]:
    from tests.memory.conftest import random_ids

    return random_ids(TINY_MEMORY, seed=7)[0].tolist()


def embedded_context() -> str:
    return EXAMPLE.read_text(encoding="utf-8")[:EMBEDDED_CONTEXT_CHARS]


def record() -> dict:
    result: dict = {"tiny": {}, "embedded": {}}
    for case in TINY_CASES:
        model = tiny_model(case)
        memory = model.memorize(tiny_memory_ids())
        runs = {"with_memory": [model.generate_ids(list(p), memory=memory, max_new_tokens=TINY_NEW_TOKENS)
                                for p in TINY_PROMPTS],
                "no_memory": model.generate_ids(list(TINY_PROMPTS[1]), max_new_tokens=TINY_NEW_TOKENS)}
        result["tiny"][case["name"]] = runs
    model = MemoryModel.from_pretrained("embedded", dtype=torch.bfloat16)  # "auto" is float32 on some CPUs
    memory = model.memorize(embedded_context())
    result["embedded"] = {
        "memory_tokens": memory.num_tokens,
        "raw_in_window": memory.state.raw_in_window,
        "ids": [model.generate_ids(p, memory=memory, max_new_tokens=EMBEDDED_NEW_TOKENS) for p in EMBEDDED_PROMPTS],
    }
    return result


if __name__ == "__main__":
    import sys

    if "--record" not in sys.argv:
        sys.exit("pass --record to overwrite data/decoding_golden.json with this checkout's decoding")
    GOLDEN.write_text(json.dumps(record(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
