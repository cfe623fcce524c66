"""Run a tree's benchmarks/train.py (with --profile) recording input shapes; dump every profile's operators by shape.

    PYTHONPATH=TREE python profile_by_shape.py TREE OUT.json [train.py options ...]

Each torch.profiler profile the script opens records shapes; OUT.json lists, per profile, each
(operator, input shapes) with its call count and self CPU microseconds (what profile_by_shape.txt sums).
"""

import json
import os
import runpy
import sys

import torch.profiler as tp

tree, out = sys.argv[1], sys.argv[2]
Original = tp.profile
profiles = []


class Recording(Original):
    def __init__(self, *args, **kwargs):
        kwargs["record_shapes"] = True
        super().__init__(*args, **kwargs)
        profiles.append(self)


tp.profile = Recording
os.chdir(tree)  # PYTHONPATH=TREE: that tree's library is the one imported
sys.argv = ["train.py", *sys.argv[3:]]
try:
    runpy.run_path(f"{tree}/benchmarks/train.py", run_name="__main__")
except SystemExit:
    pass
rows = []
for index, prof in enumerate(profiles):
    for event in prof.key_averages(group_by_input_shape=True):
        rows.append({"profile": index, "name": event.key, "shapes": str(event.input_shapes), "count": event.count,
                     "self_us": event.self_cpu_time_total})
with open(out, "w") as file:
    json.dump(rows, file)
print("dumped", len(rows))
