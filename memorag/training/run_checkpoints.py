"""Training checkpoints: written atomically, found again for resume, pruned to the last N.

A checkpoint is a folder `output_dir/checkpoint-STEP/` holding

    memory_weights.safetensors, memory_config.json   the memory parameters only (load with
                                                     MemoryModel.from_pretrained(base, memory_weights=DIR))
    adapter_model.safetensors, adapter_config.json   instead, for the reader: its LoRA adapter only
                                                     (peft's format: PeftModel.from_pretrained(base, DIR))
    train_config.yaml                                the resolved TrainConfig
    data_state.json                                  the data stream's exact position
    trainer_state.json                               step and totals, the size and sha256 of every
                                                     other file (written last)
    optimizer.pt                                     optimizer and LR scheduler state
    deepspeed/                                       the DeepSpeed engine's optimizer state, under DeepSpeed
    rng_state_RANK.pt                                python / numpy / torch (and CUDA) RNG states per process

Atomicity: everything is written into `output_dir/.checkpoint-STEP.partial/`, which
is renamed to `checkpoint-STEP` only when every process has finished; then the
`latest` file (the name of the newest checkpoint) is replaced atomically and older
checkpoints beyond `keep_last` are removed. A kill at any moment leaves either the
previous state or the new complete one: a `.partial` folder is never read, and is
removed by the next save.

Resume verifies a checkpoint against the sizes and hashes its trainer state records
(`memorag.training.resume`), so a file damaged after it was written is named, not loaded.

With `checkpoint.max_file_mb` set, every file of a checkpoint larger than that is written as numbered
parts (`optimizer.pt.part-000`, `optimizer.pt.part-001`, ...), so the run's checkpoints can be kept in
a repository that caps its files' size; each part is in the record like any file. A resume joins the
parts into the whole file beside them (`whole_files`), reads it, and removes it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from memorag.storage.io import atomic_write_text, sha256_file

from .errors import TrainingInputError

PREFIX = "checkpoint-"
LATEST = "latest"
TRAINER_STATE = "trainer_state.json"
TRAIN_CONFIG = "train_config.yaml"
DATA_STATE = "data_state.json"
OPTIMIZER = "optimizer.pt"
DEEPSPEED_DIR = "deepspeed"
DEEPSPEED_TAG = "state"
STATE_FORMAT = "memorag-trainer-state"
STATE_VERSION = 1
FILES = "files"  # the trainer state's manifest of the other files (absent in checkpoints written before it)
_NAME = re.compile(rf"^{PREFIX}(\d+)$")
_REQUIRED = (TRAINER_STATE, DATA_STATE, TRAIN_CONFIG)
# the trained weights: a memory model's, or a reader's adapter
WEIGHT_FILES = (("memory_weights.safetensors", "memory_config.json"), ("adapter_model.safetensors", "adapter_config.json"))
PART = ".part-"  # a file split by `split_large_files`: NAME.part-000, NAME.part-001, ...
_FIRST_PART = f"{PART}000"
_COPY_BYTES = 1 << 20


class CheckpointError(TrainingInputError):
    """A checkpoint that cannot be resumed from (missing, incomplete, damaged, of another stage)."""


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / f"{PREFIX}{step}"


def staging_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / f".{PREFIX}{step}.partial"


def rng_file(rank: int) -> str:
    return f"rng_state_{rank}.pt"


def is_complete(path: Path) -> bool:
    return (path.is_dir() and all((path / name).is_file() for name in _REQUIRED)
            and any(all(_present(path / name) for name in names) for names in WEIGHT_FILES))


def _present(path: Path) -> bool:
    """The file is there, whole or as parts."""
    return path.is_file() or path.with_name(path.name + _FIRST_PART).is_file()


def split_large_files(folder: Path, max_bytes: int) -> None:
    """Replace every file of `folder` larger than `max_bytes` by its parts of at most `max_bytes` each (main
    process, before the trainer state records the files)."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.stat().st_size > max_bytes):
        with path.open("rb") as whole:
            index = 0
            while chunk := whole.read(max_bytes):
                (path.parent / f"{path.name}{PART}{index:03d}").write_bytes(chunk)
                index += 1
        path.unlink()


@contextlib.contextmanager
def whole_files(folder: Path | None) -> Iterator[None]:
    """While open, every file of `folder` written as parts is there whole too (joined atomically from the parts,
    which the checkpoint's record verified, over any whole file an interrupted resume left; main process only:
    call it there, with the other processes waiting); the joined files are removed on exit."""
    joined = []
    try:
        for first in sorted(folder.rglob(f"*{_FIRST_PART}")) if folder is not None else []:
            whole = first.with_name(first.name[: -len(_FIRST_PART)])
            joined.append(whole)
            staging = whole.with_name(f".{whole.name}.joining")
            with staging.open("wb") as out:
                index = 0
                while (part := whole.with_name(f"{whole.name}{PART}{index:03d}")).is_file():
                    with part.open("rb") as source:
                        shutil.copyfileobj(source, out, _COPY_BYTES)
                    index += 1
            os.replace(staging, whole)
        yield
    finally:
        for whole in joined:
            whole.unlink(missing_ok=True)


def list_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints in `output_dir`, oldest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _NAME.match(path.name)
        if match and is_complete(path):
            found.append((int(match.group(1)), path))
    return sorted(found)


def read_latest(output_dir: str | Path) -> Path | None:
    pointer = Path(output_dir) / LATEST
    if not pointer.is_file():
        return None
    path = Path(output_dir) / pointer.read_text(encoding="utf-8").strip()
    return path if is_complete(path) else None


def find_resume(output_dir: str | Path, resume: str) -> Path | None:
    """The checkpoint to resume from: `auto` (newest complete one, if any), `none`, or a path."""
    if resume == "none":
        if list_checkpoints(output_dir):
            raise CheckpointError(
                f"{output_dir} already holds checkpoints; resume them with checkpoint.resume=auto, "
                "or choose another checkpoint.output_dir"
            )
        return None
    if resume == "auto":
        newest = list_checkpoints(output_dir)
        pointed = read_latest(output_dir)
        if not newest:
            return pointed
        # A kill between publishing a checkpoint and moving the pointer leaves the newer one unnamed.
        if pointed is None or step_of(pointed) < newest[-1][0]:
            return newest[-1][1]
        return pointed
    path = Path(resume)
    if not is_complete(path):
        weights = " or ".join(" and ".join(names) for names in WEIGHT_FILES)
        raise CheckpointError(f"checkpoint.resume={resume!r} is not a complete checkpoint folder "
                              f"(it needs {', '.join(_REQUIRED)}, and {weights})")
    return path


def step_of(path: Path) -> int:
    """The step of a `checkpoint-STEP` folder; -1 for a folder named otherwise."""
    match = _NAME.match(path.name)
    return int(match.group(1)) if match else -1


def remove_partials(output_dir: str | Path) -> None:
    root = Path(output_dir)
    if root.is_dir():
        for path in root.glob(f".{PREFIX}*.partial"):
            shutil.rmtree(path, ignore_errors=True)


def publish(output_dir: str | Path, step: int, keep_last: int) -> Path:
    """Move a finished staging folder into place, point `latest` at it, prune old ones (main process)."""
    staging, final = staging_dir(output_dir, step), checkpoint_dir(output_dir, step)
    if not is_complete(staging):
        raise RuntimeError(f"refusing to publish the incomplete checkpoint {staging}")
    share(staging)
    if final.exists():
        retired = Path(output_dir) / f".{final.name}.retired"
        shutil.rmtree(retired, ignore_errors=True)
        os.replace(final, retired)
        os.replace(staging, final)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, final)
    atomic_write_text(Path(output_dir) / LATEST, final.name + "\n")
    for old_step, path in list_checkpoints(output_dir)[:-keep_last]:
        if old_step != step:
            shutil.rmtree(path, ignore_errors=True)
    return final


def share(folder: Path) -> None:
    """Checkpoints are readable like the rest of the output (temporary folders start private)."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)
    for path in folder.rglob("*"):
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~mask)


# -- state files ----------------------------------------------------------------------------


def write_trainer_state(folder: Path, state: dict[str, Any], data_state: dict[str, Any]) -> None:
    """The data position, then the trainer state: the last file a complete checkpoint gets.

    The trainer state lists the size and sha256 of every other file of the folder, written
    by every process by now, so resume can tell an intact checkpoint from a damaged one."""
    atomic_write_text(folder / DATA_STATE, json.dumps(data_state, separators=(",", ":")) + "\n")
    document = {"format": STATE_FORMAT, "version": STATE_VERSION, **state, FILES: file_manifest(folder)}
    atomic_write_text(folder / TRAINER_STATE, json.dumps(document, indent=1) + "\n")


def file_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """{relative path: {"bytes", "sha256"}} of every file in a checkpoint folder but its trainer state."""
    files = sorted(path for path in folder.rglob("*") if path.is_file() and path != folder / TRAINER_STATE)
    return {path.relative_to(folder).as_posix(): {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
            for path in files}


def read_trainer_state(folder: Path) -> dict[str, Any]:
    try:
        document = json.loads((folder / TRAINER_STATE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(f"cannot read {folder / TRAINER_STATE}: {error}") from error
    if document.get("format") != STATE_FORMAT or document.get("version") != STATE_VERSION:
        raise CheckpointError(f"{folder / TRAINER_STATE} is not a version-{STATE_VERSION} memorag trainer state")
    try:
        document["data"] = json.loads((folder / DATA_STATE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(f"cannot read {folder / DATA_STATE}: {error}") from error
    return document


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_rng(folder: Path, rank: int) -> None:
    torch.save(rng_state(), folder / rng_file(rank))


def load_rng(folder: Path, rank: int) -> bool:
    """Restore this process's RNG states; False if the checkpoint has none for this rank."""
    path = folder / rng_file(rank)
    if not path.is_file():
        return False
    set_rng_state(torch.load(path, weights_only=False))  # our own file: python/numpy states are tuples
    return True
