"""One decoding step of the embedded generator (as `LocalGenerator.from_pretrained("embedded")` loads it) over
prompts of about 4,000 tokens, through the package's `LanguageModelRows` (whichever tree is on PYTHONPATH):
ms a step for 1 and 8 rows, 20 steps after 3 untimed ones. Run from each tree:
    cd TREE && OMP_NUM_THREADS=2 PYTHONPATH=TREE python step_ms.py"""

import json
import os
import time

import torch

from memorag.generation.batched import LanguageModelRows
from memorag.generation.local import LocalGenerator

torch.set_num_threads(2)
generator = LocalGenerator.from_pretrained("embedded")
out = {"dtype": str(next(generator.model.parameters()).dtype), "load": os.getloadavg()[0]}
for count in (1, 8):
    rows = LanguageModelRows(generator.model)
    with torch.inference_mode():
        rows.prefill([torch.randint(100, 40000, (4000 + 10 * i,), generator=torch.Generator().manual_seed(i)).tolist()
                      for i in range(count)], [64] * count)
        for _ in range(3):
            rows.decode_step([5] * count)
        start = time.perf_counter()
        for _ in range(20):
            rows.decode_step([5] * count)
        out[f"ms_per_step_{count}"] = round((time.perf_counter() - start) / 20 * 1000, 1)
print(json.dumps(out))
