"""Single needles from the training file answered from memory alone at ratios 1, 2 and 8 (NOTE.md):
is the number lost to compression, or not carried by the memory at all?

    python eval/results/memory-needles-cpu-longrange-192/probe_ratios.py \
        memorag/weights/memory-smollm2-135m-instruct runs/sft-smollm2-longrange-cpu/checkpoint-192
"""

import json
import sys

import torch

from memorag.memory.config import MemoryConfig
from memorag.memory.model import MemoryModel

DATA = "runs/data/sft/longrange_needles_cpu.jsonl"  # configs/sft/smollm2-longrange-cpu.yaml builds it
SAMPLES = 10
RATIOS = (1, 2, 8)

samples = [json.loads(line) for line in open(DATA, encoding="utf-8")]
samples = [s for s in samples if s["task"] == "longrange-niah_single"][:SAMPLES]
for weights in sys.argv[1:]:
    for ratio in RATIOS:
        config = MemoryConfig(window=256, ratios=[ratio])
        model = MemoryModel.from_pretrained("embedded:smollm2-135m-instruct", memory_weights=weights,
                                            config=config, dtype=torch.float32)
        found = 0
        for sample in samples:
            memory = model.memorize(sample["context"], show_progress=False)
            reply = model.generate(sample["instruction"], memory=memory, max_new_tokens=24)
            found += sample["target"] in reply
            print(json.dumps({"weights": weights, "ratio": ratio, "id": sample["id"], "target": sample["target"],
                              "reply": reply, "found": sample["target"] in reply}), flush=True)
        print(json.dumps({"weights": weights, "ratio": ratio, "found": found, "of": len(samples)}), flush=True)
