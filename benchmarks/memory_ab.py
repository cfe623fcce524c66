"""Same-run A/B of one decode path's first step (the one kernel registry, grouped-query attention decided
by the layer, decoding rounds always decoding steps) against the tree before it.

Usage: python ab.py TREE_A TREE_B --rounds N --out raw.jsonl
Each round runs one fresh process per tree, A then B then (next round) B then A, with PYTHONPATH set
to that tree: the embedded memory model (SmolLM2-135M-Instruct and its memory weights, float32 on the
CPU, 2 threads) memorizes a fixed text (about 1,500 tokens), decodes one prompt (24 new tokens), and
decodes three prompts as an exact batch (16 new tokens each), each timed; replies are recorded so the
two trees' outputs can be compared. The load average is recorded beside every run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

WORK = r'''
import json, os, time, torch
torch.set_num_threads(2)
from memorag.memory import MemoryModel
model = MemoryModel.from_pretrained()
text = " ".join(f"Sentence {i} tells that the {i % 7}th river crosses the {i % 11}th town." for i in range(120))
out = {}
start = time.perf_counter(); memory = model.memorize(text, show_progress=False); out["memorize_s"] = time.perf_counter() - start
start = time.perf_counter(); one = model.generate_ids("Which river crosses the 3th town?", memory=memory, max_new_tokens=24)
out["single_decode_s"] = time.perf_counter() - start
prompts = ["Name a river.", "Name a town the 2th river crosses.", "Summarize the text."]
start = time.perf_counter(); batch = model.generate_ids_batch(prompts, memory=memory, max_new_tokens=16, exact=True)
out["exact_batch_s"] = time.perf_counter() - start
out["replies"] = [one, batch]
print(json.dumps(out))
'''


def run(tree: str) -> dict:
    env = {**os.environ, "PYTHONPATH": tree, "OMP_NUM_THREADS": "2"}
    load = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", WORK], env=env, cwd=tree, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return {"tree": tree, "load_before": load, "load_after": os.getloadavg()[0],
            **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree_a")
    parser.add_argument("tree_b")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.out, "a") as sink:
        for index in range(args.rounds):
            order = (args.tree_a, args.tree_b) if index % 2 == 0 else (args.tree_b, args.tree_a)
            for tree in order:
                record = {"round": index, "side": "A" if tree == args.tree_a else "B", "time": time.time(), **run(tree)}
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                print(record["side"], {k: round(v, 2) for k, v in record.items() if k.endswith("_s")}, flush=True)


if __name__ == "__main__":
    main()
