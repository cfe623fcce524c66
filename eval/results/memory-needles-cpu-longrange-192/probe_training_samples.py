"""The first four single-needle training samples answered from memory alone, by the shipped weights and
by the CPU long-range SFT's checkpoint 192 (NOTE.md): do the weights answer what they were trained on?

    python eval/results/memory-needles-cpu-longrange-192/probe_training_samples.py \
        memorag/weights/memory-smollm2-135m-instruct runs/sft-smollm2-longrange-cpu/checkpoint-192
"""

import json
import sys

import torch

from memorag.memory.model import MemoryModel

DATA = "runs/data/sft/longrange_needles_cpu.jsonl"  # configs/sft/smollm2-longrange-cpu.yaml builds it

samples = [json.loads(line) for line in open(DATA, encoding="utf-8")]
samples = [s for s in samples if s["task"] == "longrange-niah_single"][:4]
for weights in sys.argv[1:]:
    model = MemoryModel.from_pretrained("embedded:smollm2-135m-instruct", memory_weights=weights, dtype=torch.float32)
    for sample in samples:
        memory = model.memorize(sample["context"], show_progress=False)
        reply = model.generate(sample["instruction"], memory=memory, max_new_tokens=24)
        print(json.dumps({"weights": weights, "id": sample["id"], "target": sample["target"], "reply": reply,
                          "found": sample["target"] in reply}), flush=True)
