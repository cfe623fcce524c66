"""Checks a run's inputs and claims its output folder, before the model is built.

A mistake the user can fix (a data file that is missing or empty, memory weights that are
not there, an output folder that is a file or cannot be written, sequences the model cannot
reach) is found here, in seconds, and raised as a `TrainingInputError` naming the setting
and the fix, rather than minutes later from deep inside loading or the loop.

One run per output folder: `claim_output_dir` takes the writer's lock of
`checkpoint.output_dir` (`memorag.storage.locking.save_lock`, the lock saves use) for the whole run,
and refuses a second process naming the one that holds it. The operating system drops the
lock when its holder dies, even by `kill -9`, so a killed run never blocks the next one; the
next one cleans up what the killed one left (`checkpoint.remove_partials`) only once it holds
the lock.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from memorag.memory.schedule import positions_needed
from memorag.storage.locking import SaveLockedError, save_lock
from memorag.training.data.document_files import expand_files

from .config import TrainConfig
from .errors import TrainingInputError


def check_inputs(cfg: TrainConfig) -> None:
    """Everything about the run's inputs that can be known without building the model."""
    if cfg.data.hf_dataset is None:
        if cfg.stage == "rlgf":
            check_pairs_built(cfg.data.files)
        files = check_files("data.files", cfg.data.files)
        if cfg.stage == "reader" and any(path.suffix != ".jsonl" for path in files):
            raise TrainingInputError(f"data.files={[str(p) for p in files]}: the reader reads .jsonl files of samples "
                                     "(memorag/training/data/reader_samples.py); make them with train/build_reader_data.py")
        if cfg.stage == "sft" and any(path.suffix != ".jsonl" for path in files):
            raise TrainingInputError(f"data.files={[str(p) for p in files]}: SFT reads .jsonl files of samples "
                                     "(memorag/training/data/sft.py); make them with train/build_clue_data.py")
    if cfg.eval.files:
        check_files("eval.files", cfg.eval.files)
    check_memory_weights(cfg)
    declared = cfg.model.architecture.get("max_position_embeddings")
    if isinstance(declared, int):
        check_reach(cfg, declared)


def check_pairs_built(paths: Sequence[str]) -> None:
    """The RLGF stage's pairs files are there; a missing one is named with the command that builds it."""
    for path in map(Path, paths):
        if not path.exists() and not any(char in str(path) for char in "*?["):
            again = f", or writes it again from {path}.questions" if path.with_name(path.name + ".questions").is_dir() else ""
            raise TrainingInputError(f"data.files: the pairs file {path} is not built; build it with python "
                                     f"train/build_rlgf_pairs.py --config CONFIG (this run's config: it goes on where a "
                                     f"build stopped{again})")


def check_files(key: str, paths: Sequence[str]) -> list[Path]:
    """The files `paths` expand to (as the data readers expand them); an error if none, or all empty."""
    if not paths:
        raise TrainingInputError(f"{key} is empty: name the files to read, e.g. {key}=[data/train.txt]")
    try:
        files = expand_files(paths)
    except (FileNotFoundError, ValueError) as error:
        raise TrainingInputError(f"{key}: {error}; fix the path in {key}") from None
    if all(path.stat().st_size == 0 for path in files):
        raise TrainingInputError(f"{key}: {', '.join(str(p) for p in files)} hold no data (empty); "
                                 f"point {key} at files with text")
    return files


def check_memory_weights(cfg: TrainConfig) -> None:
    """`model.memory_weights`, when given, is a folder of intact memory weights (or a name for them)."""
    from memorag.memory.checkpoint import (
        MemoryWeightsError,
        MemoryWeightsUnavailableError,
        memory_weights_for,
        verify_memory_weights,
    )

    given = cfg.model.memory_weights
    if given is None:
        return
    try:
        folder = memory_weights_for(cfg.model.base, given)
        if folder is not None:
            verify_memory_weights(folder)
    except (FileNotFoundError, NotADirectoryError, MemoryWeightsError, MemoryWeightsUnavailableError,
            ValueError) as error:
        raise TrainingInputError(f"model.memory_weights={given}: {error}; point it at the final/ or "
                                 "checkpoint-STEP/ folder of an earlier run, or set model.memory_weights=null") from None


def check_reach(cfg: TrainConfig, max_positions: int) -> None:
    """Pretraining sequences of `data.max_length` tokens fit in the model's positions at the smallest ratio."""
    if cfg.stage != "pretrain":
        return  # SFT skips the samples that do not fit, and says so when none does
    ratio, window = min(cfg.memory.ratios), cfg.memory.window
    needed = positions_needed(cfg.data.max_length, window, ratio)
    if needed > max_positions:
        raise TrainingInputError(
            f"data.max_length={cfg.data.max_length} is beyond the model's reach: at ratio {ratio} with window "
            f"{window} it needs {needed} positions, the model has {max_positions}; lower data.max_length "
            "(and data.min_length), or raise the smallest of memory.ratios"
        )


def prepare_output_dir(path: Path) -> Path:
    """Create `checkpoint.output_dir` and make sure files can be written in it; its resolved path."""
    shown = f"checkpoint.output_dir={path}"
    if path.exists() and not path.is_dir():
        raise TrainingInputError(f"{shown} is a file, not a folder; choose another checkpoint.output_dir")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise TrainingInputError(f"{shown} cannot be created: a part of the path is a file; "
                                 "choose another checkpoint.output_dir") from None
    except OSError as error:
        raise TrainingInputError(f"{shown} cannot be created ({error.strerror}); choose a folder you can "
                                 "write to as checkpoint.output_dir") from None
    try:
        handle, probe = tempfile.mkstemp(dir=path, prefix=".write-test-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise TrainingInputError(f"{shown} is not writable ({error.strerror}); fix its permissions or choose "
                                 "another checkpoint.output_dir") from None
    return path.resolve()


def claim_output_dir(path: Path, stop_file: str, stack: contextlib.ExitStack) -> None:
    """Hold the lock of output folder `path` until `stack` closes; refuse if another process holds it."""
    try:
        stack.enter_context(save_lock(path, wait=0))
    except SaveLockedError as error:
        raise TrainingInputError(
            f"checkpoint.output_dir={path} is in use by {error.holder}: one run per folder. Wait for that run to "
            f"end (or stop it cleanly: touch {path / stop_file}), or choose another checkpoint.output_dir"
        ) from None
    except OSError as error:  # the lock file lives beside the folder, in its parent
        raise TrainingInputError(f"cannot create the lock file of checkpoint.output_dir={path} in {path.parent} "
                                 f"({error.strerror}); make {path.parent} writable or choose another "
                                 "checkpoint.output_dir") from None
