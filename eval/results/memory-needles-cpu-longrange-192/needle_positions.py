"""Where each probed needle lies in the ids the memory model memorizes (probe_ratios.py's samples,
NOTE.md): its first token, the context's length, and whether it is in the last, unfinished window
of 256 tokens, which a reply reads as raw tokens rather than from the memory's rows.

    python eval/results/memory-needles-cpu-longrange-192/needle_positions.py
"""

import json

from transformers import AutoTokenizer

from memorag.chat_layout import PromptLayout, encode
from memorag.embedded import resolve_lm

DATA = "runs/data/sft/longrange_needles_cpu.jsonl"  # configs/sft/smollm2-longrange-cpu.yaml builds it
SAMPLES = 10  # as probe_ratios.py
WINDOW = 256

tokenizer = AutoTokenizer.from_pretrained(resolve_lm("embedded:smollm2-135m-instruct"))
layout = PromptLayout.for_tokenizer(tokenizer)
samples = [json.loads(line) for line in open(DATA, encoding="utf-8")]
samples = [s for s in samples if s["task"] == "longrange-niah_single"][:SAMPLES]
for sample in samples:
    context = layout.context(sample["context"])
    before = context[: context.index(sample["target"])]
    needle = len(encode(tokenizer, layout, before, first=True))
    tokens = len(encode(tokenizer, layout, context, first=True))
    last_window_start = tokens - tokens % WINDOW
    print(json.dumps({"id": sample["id"], "needle_token": needle, "context_tokens": tokens,
                      "in_last_unfinished_window": needle >= last_window_start}))
