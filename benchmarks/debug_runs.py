"""Wall time of the README's two debug training commands on this machine.

    python benchmarks/debug_runs.py [--rounds 1] [--out results/benchmarks/debug_runs.json]

Runs `python train/pretrain.py --config configs/debug.yaml` and then
`python train/sft.py --config configs/debug-sft.yaml` exactly as the README gives them,
each into a fresh temporary `checkpoint.output_dir` (the configs' own folders would
resume a finished run and return at once). The time is the whole command: interpreter
start, imports, model build, training, the held-out check and the saves. Prints a table
and writes JSON with the machine (`memorag.benchmarking.machine`) and every run's summary line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memorag.benchmarking.machine import load_average, machine_record
from memorag.storage.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {"pretrain": ["train/pretrain.py", "--config", "configs/debug.yaml"],
            "sft": ["train/sft.py", "--config", "configs/debug-sft.yaml"]}


def time_command(name: str, folder: Path) -> dict:
    command = [sys.executable, *COMMANDS[name], f"checkpoint.output_dir={folder / name}", "logging.progress_bar=false"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return {"name": name, "command": " ".join(COMMANDS[name]), "seconds": round(seconds, 2),
            "summary": json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "debug_runs.json"))
    args = parser.parse_args()
    before = load_average()
    runs = []
    for _ in range(args.rounds):
        for name in COMMANDS:
            with tempfile.TemporaryDirectory(prefix="memorag-debug-") as folder:
                runs.append(time_command(name, Path(folder)))
    record = {"machine": machine_record(before), "runs": runs}
    print(f"{'command':<50} {'steps':>5} {'seconds':>8}")
    for run in runs:
        print(f"{run['command']:<50} {run['summary']['step']:>5} {run['seconds']:>8.1f}")
    print(f"on {record['machine']['cpu']} ({record['machine']['cores']} cores), load before "
          f"{before}, after {record['machine']['load_average_after']}")
    atomic_write_text(args.out, json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
