"""Resuming a run: which checkpoint (verified file by file), and whether the settings may change.

A checkpoint's `trainer_state.json` records the size and sha256 of every other file it
holds (`checkpoint.file_manifest`). Before anything is loaded, the checkpoint to resume
from is checked against that record; a damaged newest checkpoint is set aside and the
newest intact one used, or the run stops naming the `checkpoint.resume=` to pass
(`checkpoint.if_damaged`).

The settings of the new command are then compared, key by key, with the ones the
checkpoint was trained under (its own `train_config.yaml`). Each setting is one of:

    adjustable  how the run is logged, evaluated, saved and stopped (`logging.*`,
                `checkpoint.*`, `eval.every_steps`/`at_start`/`at_end`, `optim.stop_at_step`,
                `optim.max_steps` upward, `model.gradient_checkpointing`, `model.compile_windows`):
                applied and logged
    guarded     what the run computes (seed, precision, optimizer and schedule, data,
                memory, loss, the held-out set): refused, unless
                `checkpoint.resume_with_changes=true` applies them from the resumed step
    fixed       what is being trained (`stage`, the rest of `model.*`, `adapter.*`): always refused

Every change a resume applies is logged to `train_log.jsonl` (event `resume`) and kept in
the `resumes` list of each later checkpoint's trainer state.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memorag.config import config_to_dict
from memorag.storage.io import atomic_write_text, sha256_file

from . import run_checkpoints as ckpt
from .config import TrainConfig
from .errors import TrainingInputError

logger = logging.getLogger(__name__)

Kind = Literal["adjustable", "guarded", "fixed"]
OVERRIDE = "checkpoint.resume_with_changes"
# A key matches an entry equal to it, or one ending in "." that it starts with.
ADJUSTABLE = ("logging.", "checkpoint.", "eval.every_steps", "eval.at_start", "eval.at_end", "optim.stop_at_step",
              "model.gradient_checkpointing", "model.compile_windows")
FIXED = ("stage", "model.", "adapter.")
UNSET = "(unset)"


@dataclass(frozen=True)
class Change:
    """One setting whose value differs between a checkpoint and the resuming command."""

    key: str
    before: Any
    after: Any
    kind: Kind

    def __str__(self) -> str:
        return f"{self.key} {_show(self.before)} -> {_show(self.after)}"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "from": self.before, "to": self.after, "kind": self.kind}


def setting_changes(saved: Mapping[str, Any], cfg: TrainConfig) -> list[Change]:
    """Every setting that differs between a checkpoint's config (as read from its YAML) and `cfg`.

    A key the checkpoint lacks (a setting added since) counts as its default value."""
    before = {**_flatten(config_to_dict(TrainConfig())), **_flatten(_plain(saved))}
    after = _flatten(_plain(config_to_dict(cfg)))
    changes = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, UNSET), after.get(key, UNSET)
        if old != new:
            changes.append(Change(key, old, new, _kind(key, old, new)))
    return changes


def check_settings(folder: Path, cfg: TrainConfig) -> list[Change]:
    """The changes a resume from checkpoint `folder` applies; raises if any may not be applied."""
    from memorag.config import read_config_file

    changes = setting_changes(read_config_file(folder / ckpt.TRAIN_CONFIG), cfg)
    fixed = [c for c in changes if c.kind == "fixed"]
    guarded = [c for c in changes if c.kind == "guarded"]
    if fixed:
        raise TrainingInputError(
            f"{folder} was trained as another model: {'; '.join(map(str, fixed))}. These cannot change within a "
            f"run: rerun with the checkpoint's settings, or start a new run in another checkpoint.output_dir"
        )
    if guarded and not cfg.checkpoint.resume_with_changes:
        raise TrainingInputError(
            f"resuming {folder} with settings it was not trained with: {'; '.join(map(str, guarded))}. Rerun with "
            f"the checkpoint's settings (its {ckpt.TRAIN_CONFIG}), start a new run in another "
            f"checkpoint.output_dir, or pass {OVERRIDE}=true to apply them from this step on (recorded in "
            f"train_log.jsonl and in later checkpoints)"
        )
    if changes:
        logger.warning("resuming %s with changed settings: %s", folder, "; ".join(map(str, changes)))
    return changes


def damage(folder: Path) -> str | None:
    """What is wrong with checkpoint `folder` (naming the file), or None if every file is intact."""
    try:
        state = ckpt.read_trainer_state(folder)
    except ckpt.CheckpointError as error:
        return str(error)
    manifest = state.get(ckpt.FILES)
    if manifest is None:  # written before checkpoints recorded their files: try to read each one
        return _unreadable(folder)
    for name, expected in manifest.items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        size = path.stat().st_size
        if size != expected["bytes"]:
            return f"{path} has {size} bytes where {expected['bytes']} were written (truncated or overwritten)"
        if sha256_file(path) != expected["sha256"]:
            return f"{path} differs from what was written (its sha256 does not match trainer_state.json)"
    return None


def _unreadable(folder: Path) -> str | None:
    """For a checkpoint without a file record: the first file that cannot be read back."""
    import torch
    import yaml
    from safetensors.torch import load_file

    readers = {".safetensors": lambda p: load_file(str(p)), ".json": lambda p: json.loads(p.read_text()),
               ".yaml": lambda p: yaml.safe_load(p.read_text()),
               ".pt": lambda p: torch.load(p, map_location="cpu", weights_only=False)}  # our own files
    for path in sorted(folder.rglob("*")):
        read = readers.get(path.suffix)
        if read is None or not path.is_file():
            continue
        try:
            read(path)
        except Exception as error:  # noqa: BLE001 - any failure to read it back means the file is damaged
            return f"{path} cannot be read ({type(error).__name__}: {error})"
    return None


def select_checkpoint(output_dir: Path, resume: str, if_damaged: str) -> Path | None:
    """The verified checkpoint to resume from (main process, holding the output folder's lock)."""
    chosen = ckpt.find_resume(output_dir, resume)
    if chosen is None:
        return None
    problem = damage(chosen)
    if problem is None:
        return chosen
    newest_step = ckpt.step_of(chosen)
    intact, damaged = None, [(chosen, problem)]
    for step, path in reversed(ckpt.list_checkpoints(chosen.parent)):
        if newest_step >= 0 and step >= newest_step:
            continue
        found = damage(path)
        if found is None:
            intact = path
            break
        damaged.append((path, found))
    if intact is None:
        raise ckpt.CheckpointError(
            f"{problem}, and no intact checkpoint is left in {chosen.parent} to resume from. Start a new run in "
            "another checkpoint.output_dir (or checkpoint.resume=none after moving the damaged checkpoints away)"
        )
    if resume != "auto" or if_damaged == "refuse":
        raise ckpt.CheckpointError(f"{problem}; resume from the newest intact checkpoint with "
                                   f"checkpoint.resume={intact}")
    for path, found in damaged:
        aside = _aside(path)
        os.replace(path, aside)
        logger.warning("%s; checkpoint %s set aside as %s", found, path.name, aside.name)
    atomic_write_text(output_dir / ckpt.LATEST, intact.name + "\n")
    logger.warning("resuming from the newest intact checkpoint, %s (checkpoint.if_damaged=fallback)", intact)
    return intact


def _aside(path: Path) -> Path:
    """`checkpoint-STEP.damaged` (or `.damaged-2`, ...): no longer a checkpoint, kept for inspection."""
    candidate, number = path.with_name(f"{path.name}.damaged"), 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.damaged-{number}")
    return candidate


def _kind(key: str, before: Any, after: Any) -> Kind:
    if key == "optim.max_steps":
        grows = isinstance(before, int) and isinstance(after, int) and after > before
        return "adjustable" if grows else "guarded"
    if _matches(key, ADJUSTABLE):
        return "adjustable"
    if _matches(key, FIXED):
        return "fixed"
    return "guarded"


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    return any(key == p or (p.endswith(".") and key.startswith(p)) for p in patterns)


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _plain(tree: Any) -> Any:
    """A YAML-read config with the shapes `config_to_dict` gives (lists, not tuples)."""
    return json.loads(json.dumps(tree, default=str))


def _show(value: Any) -> str:
    return value if value == UNSET else json.dumps(value)
