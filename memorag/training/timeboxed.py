"""Training within one time-boxed GPU run: inputs in parts, a background run on a clock, results in parts.

A time-boxed run has a GPU machine for a fixed time, as a SLURM job has its time limit or a spot
or on-demand instance its rented hours; this driver is built for a tight one: at most 30 minutes
on the machine, 10 per command, a working tree of at most 64 MiB sent each command and at most
8 files of 16 MiB brought back; files written beside the tree persist, and a `setsid` process
keeps running, while the machine is held.
docs/contributors/timeboxed-gpu-runs.md gives the command sequence; this module is
what `train/timeboxed.py` runs:

- `receive` copies the parts a command carried into the run's folder (they persist);
- `assemble` checks and joins them: the base (`base_pack`), the data (extracted into the
  working tree, where the configs' paths point) and, when given, an earlier run's results (its checkpoints resume);
- `start` runs `drive` in a new session: stage 1 for its seconds, clue SFT from stage 1's
  newest checkpoint for its seconds, the held-out control (optionally also of stage 1's
  checkpoint, while SFT runs beside it), each stage stopped through the
  trainer's stop file (it checkpoints first) and checkpointing every `checkpoint.every_seconds`;
  rerun, a stage resumes exactly from its newest checkpoint;
- `wait` reports progress until the run ends or its seconds pass (a command's time);
- `export` bundles the weights, logs, configs, resumable checkpoints and the control's JSON
  into at most 8 parts of at most 16 MiB.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import run_checkpoints as ckpt
from .base_pack import restore_base
from .parts import MIB, bundle, unbundle

STATUS = "status.json"
RETURN_FILES = 8
RETURN_PART_BYTES = 16 * MIB - 64 * 1024  # under 16 MiB with room to spare


@dataclass
class TimeboxedPlan:
    pretrain_config: str
    sft_config: str
    pretrain_seconds: float
    sft_seconds: float
    folder: str = "runs/timeboxed"
    device: str = "cuda"  # "cpu": the same run with the accelerator hidden (the CPU tests)
    eval_ratios: list[int] = field(default_factory=lambda: [2, 4, 8])
    checkpoint_seconds: float = 180.0
    overrides: list[str] = field(default_factory=list)  # key=value for both stages and the control
    pretrain_overrides: list[str] = field(default_factory=list)  # key=value for stage 1 only
    sft_overrides: list[str] = field(default_factory=list)  # key=value for clue SFT only
    control_stage1: bool = False  # also the control of stage 1's checkpoint, beside SFT (eval/control-pretrain.json)

    @property
    def root(self) -> Path:
        return Path(self.folder)

    def stage_dir(self, stage: str) -> Path:
        return self.root / stage

    def common(self) -> list[str]:
        base = self.root / "base"
        return ([f"model.base={base}"] if base.is_dir() else []) + list(self.overrides)


def receive(source: str | Path, folder: str | Path) -> list[Path]:
    """Copy every file of `source` into `folder`/in (parts persist there across commands)."""
    target = Path(folder) / "in"
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in sorted(Path(source).iterdir()):
        if path.is_file():
            copied.append(Path(shutil.copyfile(path, target / path.name)))
    return copied


def assemble(folder: str | Path, worktree: str | Path = ".") -> dict[str, str]:
    """Join what `folder`/in holds: `base` -> the bf16 base folder, `data` -> the working tree, `results` -> `folder`."""
    root, incoming, done = Path(folder), Path(folder) / "in", {}
    if (incoming / "base.manifest.json").is_file():
        unbundle("base", [incoming], root / "base-pack")
        restore_base(root / "base-pack", root / "base")
        shutil.rmtree(root / "base-pack")
        done["base"] = str(root / "base")
    if (incoming / "data.manifest.json").is_file():
        unbundle("data", [incoming], worktree)
        done["data"] = str(worktree)
    if (incoming / "results.manifest.json").is_file():  # an earlier run's export: its checkpoints resume
        unbundle("results", [incoming], root)
        done["results"] = str(root)
    return done


def _write_status(plan: TimeboxedPlan, **fields) -> None:
    status = _read_status(plan.root) | fields | {"time": time.time()}
    path = plan.root / STATUS
    path.with_suffix(".tmp").write_text(json.dumps(status, indent=1) + "\n", encoding="utf-8")
    os.replace(path.with_suffix(".tmp"), path)


def _read_status(root: Path) -> dict:
    path = root / STATUS
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _environment(plan: TimeboxedPlan) -> dict[str, str]:
    env = dict(os.environ)
    if plan.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _run_stage(plan: TimeboxedPlan, script: str, config: str, stage: str, seconds: float, extra: list[str]) -> int:
    """One training stage, stopped through its stop file after `seconds` of wall time (it checkpoints first)."""
    output_dir = plan.stage_dir(stage)
    command = [sys.executable, script, "--config", config, f"checkpoint.output_dir={output_dir}",
               f"checkpoint.every_seconds={plan.checkpoint_seconds}", *plan.common(), *extra]
    with open(plan.root / f"{stage}.out", "a", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=_environment(plan))
        deadline = time.monotonic() + seconds
        while process.poll() is None:
            if time.monotonic() >= deadline and not (output_dir / "STOP").exists():
                output_dir.mkdir(parents=True, exist_ok=True)
                (output_dir / "STOP").touch()
            time.sleep(0.5)
    return process.returncode


def _control(plan: TimeboxedPlan, weights: Path, name: str) -> subprocess.Popen:
    """The held-out control of `weights` at the plan's ratios with the other-text condition, into eval/`name`."""
    out = plan.root / "eval" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    ratios = "[" + ",".join(map(str, plan.eval_ratios)) + "]"
    command = [sys.executable, "train/evaluate.py", "--config", plan.pretrain_config, *plan.common(),
               f"model.memory_weights={weights}", f"eval.ratios={ratios}", "eval.other_text_control=true",
               "--out", str(out)]
    with open(plan.root / f"{out.stem}.out", "a", encoding="utf-8") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=_environment(plan))


def drive(plan: TimeboxedPlan) -> int:
    """Stage 1, clue SFT from its newest checkpoint, then the held-out control (each step's state in status.json)."""
    plan.root.mkdir(parents=True, exist_ok=True)
    _write_status(plan, settings=asdict(plan), phase="pretrain", done=False)
    code = _run_stage(plan, "train/pretrain.py", plan.pretrain_config, "pretrain", plan.pretrain_seconds,
                      plan.pretrain_overrides)
    stage1 = ckpt.read_latest(plan.stage_dir("pretrain"))
    if code or stage1 is None:
        _write_status(plan, phase="failed in pretrain", returncode=code, done=True)
        return code or 1
    _write_status(plan, phase="sft", pretrain_checkpoint=str(stage1))
    stage1_control = _control(plan, stage1, "control-pretrain.json") if plan.control_stage1 else None
    code = _run_stage(plan, "train/sft.py", plan.sft_config, "sft", plan.sft_seconds,
                      [f"model.memory_weights={stage1}", *plan.sft_overrides])
    final = ckpt.read_latest(plan.stage_dir("sft"))
    if code or final is None:
        if stage1_control is not None:
            stage1_control.wait()
        _write_status(plan, phase="failed in sft", returncode=code, done=True)
        return code or 1
    _write_status(plan, phase="control", sft_checkpoint=str(final))
    code = _control(plan, final, "control.json").wait()
    if stage1_control is not None:
        code = code or stage1_control.wait()
    _write_status(plan, phase="finished" if code == 0 else "failed in control", returncode=code, done=True)
    return code


def start(plan: TimeboxedPlan) -> int:
    """`drive` in a new session (it outlives the command), its output in `folder`/drive.out; returns its pid."""
    plan.root.mkdir(parents=True, exist_ok=True)
    (plan.root / "plan.json").write_text(json.dumps(asdict(plan), indent=1) + "\n", encoding="utf-8")
    with open(plan.root / "drive.out", "a", encoding="utf-8") as log:
        process = subprocess.Popen([sys.executable, "train/timeboxed.py", "drive", "--folder", plan.folder],
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return process.pid


def load_plan(folder: str | Path) -> TimeboxedPlan:
    return TimeboxedPlan(**json.loads((Path(folder) / "plan.json").read_text(encoding="utf-8")))


def progress(folder: str | Path) -> str:
    """The phase and each stage's last log record."""
    root = Path(folder)
    lines = [json.dumps({k: v for k, v in _read_status(root).items() if k != "settings"})]
    for stage in ("pretrain", "sft"):
        log = root / stage / "train_log.jsonl"
        if log.is_file() and log.stat().st_size:
            lines.append(f"{stage}: {log.read_text(encoding='utf-8').splitlines()[-1]}")
    return "\n".join(lines)


def wait(folder: str | Path, seconds: float, every: float = 60.0) -> bool:
    """Print progress every `every` seconds until the run is done or `seconds` pass; True when done."""
    deadline = time.monotonic() + seconds
    while True:
        done = bool(_read_status(Path(folder)).get("done"))
        print(progress(folder), flush=True)
        if done or time.monotonic() >= deadline:
            return done
        time.sleep(max(0.0, min(every, deadline - time.monotonic())))


def export_files(folder: str | Path, checkpoints: bool = True) -> dict[str, Path]:
    """What comes back: status, plan, outputs, each stage's log, config, final weights and (optionally) newest checkpoint."""
    root, files = Path(folder), {}
    for path in [root / STATUS, root / "plan.json", *sorted(root.glob("*.out")), *sorted((root / "eval").glob("*"))]:
        if path.is_file():
            files[str(path.relative_to(root))] = path
    for stage in ("pretrain", "sft"):
        stage_dir = root / stage
        chosen = [stage_dir / "train_log.jsonl", stage_dir / ckpt.TRAIN_CONFIG, stage_dir / ckpt.LATEST]
        chosen += sorted((stage_dir / "final").glob("*"))
        latest = ckpt.read_latest(stage_dir) if stage_dir.is_dir() else None
        if checkpoints and latest is not None:
            chosen += sorted(p for p in latest.rglob("*") if p.is_file())
        for path in chosen:
            if path.is_file():
                files[str(path.relative_to(root))] = path
    return files


def export(folder: str | Path, out_dir: str | Path, checkpoints: bool = True,
           part_bytes: int = RETURN_PART_BYTES, max_files: int = RETURN_FILES) -> list[Path]:
    """The run's results as bundle `results` in `out_dir`: at most `max_files` files of at most `part_bytes`."""
    return bundle(export_files(folder, checkpoints), out_dir, "results", part_bytes, compress=True,
                  max_files=max_files)
