"""A FAKE SLURM for the tests of slurm/: `sbatch`, `srun` and `scontrol` on PATH that record what is
submitted and run each job at once, in submission order, as SLURM would run it (its variables, its
array tasks, `--export`), refusing to run a job whose `afterok` dependency did not end well.

Also a FAKE venv (`bin/accelerate`, `bin/python`) for the chain tests: its trainer and evaluator only
check that the memory weights they are given exist (what the stage before wrote) and write what the
stage writes (`OUTPUT/final/`, `OUTPUT/results.md`, RLGF's pairs file), recording their command lines.

Every event is one JSON line in the log: {"event": "submit" | "run" | "srun" | "requeue" | "accelerate"
| "python", ...}.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

_SBATCH = r'''
import json, os, re, subprocess, sys
from pathlib import Path

log, state = os.environ["FAKE_SLURM_LOG"], Path(os.environ["FAKE_SLURM_STATE"])
def record(**event):
    with open(log, "a") as handle:
        handle.write(json.dumps(event) + "\n")

args = sys.argv[1:]
options = []
while args and args[0].startswith("-"):
    options.append(args.pop(0))
script, script_args = args[0], args[1:]
ids = state / "next_id"
job = int(ids.read_text()) if ids.exists() else 1000
ids.write_text(str(job + 1))
values = dict(option[2:].split("=", 1) for option in options if "=" in option)
record(event="submit", job=job, options=options, script=script, args=script_args)
print(job if "--parsable" in options else f"Submitted batch job {job}")
sys.stdout.flush()

if os.environ.get("FAKE_SLURM_RUN") == "1":
    dependency = values.get("dependency")
    if dependency is not None:
        kind, _, after = dependency.partition(":")
        assert kind == "afterok", dependency
        if not (state / f"ok-{after}").exists():
            record(event="never-ran", job=job, reason=f"dependency {dependency} not met")
            sys.exit(0)
    text = Path(script).read_text()
    name = values.get("job-name") or re.search(r"#SBATCH --job-name=(\S+)", text).group(1)
    env = dict(os.environ, SLURM_JOB_NAME=name, SLURM_SUBMIT_DIR=os.getcwd(), SLURM_JOB_NODELIST="node1",
               SLURM_NNODES="1", SLURM_NODEID="0", SLURM_CPUS_PER_TASK="2", SLURM_GPUS_ON_NODE="1")
    export = values.get("export", "ALL").split(",")
    assert export[0] == "ALL", export
    env.update(item.split("=", 1) for item in export[1:])
    tasks = [None]
    if "array" in values:
        low, high = map(int, values["array"].split("%")[0].split("-"))
        tasks = list(range(low, high + 1))
        env.update(SLURM_ARRAY_JOB_ID=str(job), SLURM_ARRAY_TASK_COUNT=str(len(tasks)),
                   SLURM_ARRAY_TASK_MIN=str(low), SLURM_ARRAY_TASK_MAX=str(high), SLURM_ARRAY_TASK_STEP="1")
    codes = []
    for task in tasks:
        task_env = dict(env, SLURM_JOB_ID=str(job if task is None else job * 100 + task))
        if task is not None:
            task_env["SLURM_ARRAY_TASK_ID"] = str(task)
        done = subprocess.run(["bash", script, *script_args], env=task_env, capture_output=True, text=True)
        record(event="run", job=job, task=task, rc=done.returncode, output=done.stdout + done.stderr)
        codes.append(done.returncode)
    if not any(codes):
        (state / f"ok-{job}").touch()
'''

_SRUN = r'''
import json, os, sys
args = sys.argv[1:]
while args and args[0].startswith("-"):
    args.pop(0)
with open(os.environ["FAKE_SLURM_LOG"], "a") as handle:
    handle.write(json.dumps({"event": "srun", "command": args, "job": os.environ.get("SLURM_JOB_ID"),
                             "task": os.environ.get("SLURM_ARRAY_TASK_ID")}) + "\n")
os.execvp(args[0], args)
'''

_SCONTROL = r'''
import json, os, sys
if sys.argv[1:3] == ["show", "hostnames"]:
    print("node1")
elif sys.argv[1] == "requeue":
    with open(os.environ["FAKE_SLURM_LOG"], "a") as handle:
        handle.write(json.dumps({"event": "requeue", "job": sys.argv[2]}) + "\n")
else:
    sys.exit(f"fake scontrol: unexpected {sys.argv[1:]}")
'''

# The FAKE stages: each checks what it reads exists and writes what the real one writes.
_STAGE = r'''
import json, os, sys, time
from pathlib import Path
import yaml

tool = Path(sys.argv[0]).name
args = sys.argv[1:]
with open(os.environ["FAKE_SLURM_LOG"], "a") as handle:
    handle.write(json.dumps({"event": tool, "args": args, "job": os.environ.get("SLURM_JOB_ID"),
                             "task": os.environ.get("SLURM_ARRAY_TASK_ID")}) + "\n")
time.sleep(float(os.environ.get("FAKE_STAGE_SECONDS", "0")))  # a long run, for the requeue tests
config = Path(args[args.index("--config") + 1])
settings = yaml.safe_load(config.read_text())
overrides = dict(arg.split("=", 1) for arg in args if "=" in arg and not arg.startswith("-"))
pairs = Path(overrides.get("data.files", str(settings.get("data", {}).get("files", [""]))).strip("[]'\" "))
if tool == "accelerate" or "train/build_rlgf_pairs.py" in args:
    out = Path(overrides.get("checkpoint.output_dir", settings["checkpoint"]["output_dir"]))
    weights = overrides.get("model.memory_weights", settings["model"].get("memory_weights"))
    final = out / "final"
    if "train/rlgf.py" in args and not pairs.is_file():
        sys.exit(f"fake {tool}: the pairs {pairs} were not built")
    if "train/build_rlgf_pairs.py" in args:  # the pairs builder writes the pairs, not final/
        final, pairs_text = None, str(weights)
else:
    out = Path(overrides.get("out_dir", settings["out_dir"]))
    weights = overrides.get("pipeline.memory_weights", settings["pipeline"].get("memory_weights"))
    final = out / ("merged" if "--merge" in args else f"shard-{overrides.get('shard', 'all').replace('/', '-of-')}")
if weights is not None and not Path(weights).is_dir():
    sys.exit(f"fake {tool}: memory weights {weights} do not exist")
if final is None:
    pairs.parent.mkdir(parents=True, exist_ok=True)
    pairs.write_text(pairs_text)
else:
    final.mkdir(parents=True, exist_ok=True)
    (final / "read_from.txt").write_text(str(weights))
'''


def _write(path: Path, body: str) -> None:
    path.write_text(f"#!{sys.executable}\n{body.lstrip()}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def install(root: Path, run: bool = True, fake_stages: bool = True) -> dict[str, str]:
    """Write the fakes under `root`; returns the environment that puts them on PATH (and, with
    `fake_stages`, sets MEMORAG_VENV to the fake venv)."""
    bin_dir, venv, state = root / "bin", root / "venv", root / "state"
    for folder in (bin_dir, venv / "bin", state):
        folder.mkdir(parents=True, exist_ok=True)
    _write(bin_dir / "sbatch", _SBATCH)
    _write(bin_dir / "srun", _SRUN)
    _write(bin_dir / "scontrol", _SCONTROL)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_SLURM_LOG": str(root / "log.jsonl"),
           "FAKE_SLURM_STATE": str(state), "FAKE_SLURM_RUN": "1" if run else "0"}
    if fake_stages:
        _write(venv / "bin" / "accelerate", _STAGE)
        _write(venv / "bin" / "python", _STAGE)
        env["MEMORAG_VENV"] = str(venv)
    return env


def events(root: Path, kind: str | None = None) -> list[dict]:
    path = root / "log.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [event for event in lines if kind is None or event["event"] == kind]
