"""How far the fifth run's rank-16 updates move when brought to rank 8 (before the sixth run trains):
each projection's relative Frobenius error, written to runs/reader-embedded-6/truncation.json.

    python runs/reader-embedded-6/truncation.py
"""

import json
import statistics

import torch
from safetensors.torch import load_file

from memorag.training.lora_rank import LORA_A, LORA_B, lower_rank

cfg = json.load(open("runs/reader-embedded-5/final/adapter_config.json"))
state = load_file("runs/reader-embedded-5/final/adapter_model.safetensors")
scale = cfg["lora_alpha"] / cfg["r"]
low = lower_rank(state, 8, scale / (16 / 8))
errors = {}
for ka in (k for k in state if LORA_A in k):
    kb = ka.replace(LORA_A, LORA_B)
    full = scale * state[kb].double() @ state[ka].double()
    approx = 2.0 * low[kb].double() @ low[ka].double()
    errors[ka.replace(".lora_A.weight", "")] = round(float(torch.linalg.matrix_norm(full - approx)
                                                         / torch.linalg.matrix_norm(full)), 4)
values = sorted(errors.values())
record = {"command": "python runs/reader-embedded-6/truncation.py",
          "adapter": "runs/reader-embedded-5/final (rank 16, alpha 32)", "to_rank": 8, "projections": len(values),
          "relative_error_median": statistics.median(values), "relative_error_max": max(values),
          "relative_error_min": min(values), "per_projection": errors}
json.dump(record, open("runs/reader-embedded-6/truncation.json", "w"), indent=1)
print(record["projections"], record["relative_error_median"], record["relative_error_max"])
