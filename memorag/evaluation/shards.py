"""Sharded evaluation: the I-th of N disjoint parts of a run's questions, each in a folder of its own.

    python eval/run.py --config C shard=0/4        # ... shard=3/4, on four GPUs, nodes or array tasks
    python eval/run.py --config C --merge          # the four parts -> the files an unsharded run writes

Which shard asks a question is a pure function of the question (`Shard.owns`): the sha256 of its
task name, context length and example id, modulo N. A rerun, a requeued job or a shard started
on another machine picks up the same part, and a question is asked by exactly one shard, in every
mode (its modes share the memory and index built for its context). A context whose questions fall
in several shards is memorized by each of them.

Shard I of N writes ``OUT/shards/I-of-N/``, a results folder like any other (``results_store``: its
records, resumable as they are made; its cells; ``results.md`` of its part) plus ``shard.json``:
per task and length, the ids of every example built and of those the shard owns, and whether the
shard has finished. The merge (`merge_shards`) reads the N folders, checks that each is complete
and that the parts together are the whole run, made with the settings and models of the config it
is given, and writes ``OUT/examples.jsonl``, ``cells.jsonl``, ``results.md``, ``plots/``,
``config.yaml``, ``models.json`` and ``prompts.json`` as an unsharded run would: the same records
(their timings aside) whatever the order the shards finished in.

Several processes of one launcher take their shard from its variables (`shard_from_environment`):
``accelerate launch`` and ``torchrun`` set ``RANK`` and ``WORLD_SIZE``; ``slurm/eval.sbatch``, run as
a job array, passes ``shard=`` from ``SLURM_ARRAY_TASK_ID`` and ``SLURM_ARRAY_TASK_COUNT``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorag.config import ConfigError
from memorag.storage.io import atomic_write_text

SHARDS_DIR = "shards"
MANIFEST_FILE = "shard.json"
_FOLDER = re.compile(r"^(\d+)-of-(\d+)$")


@dataclass(frozen=True)
class Shard:
    """Shard `index` (0-based) of `count`."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"shard={self.index}/{self.count}: the number of shards must be at least 1")
        if not 0 <= self.index < self.count:
            raise ConfigError(f"shard={self.index}/{self.count}: the shard index counts from 0, so use "
                              f"0/{self.count} to {self.count - 1}/{self.count}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` -> ``Shard(I, N)``; a clear error for anything else."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
        if match is None:
            raise ConfigError(f"shard={text!r}: write shard=I/N, the I-th (from 0) of N parts, e.g. shard=0/4")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def folder_name(self) -> str:
        return f"{self.index}-of-{self.count}"

    def directory(self, out_dir: str | os.PathLike[str]) -> Path:
        return Path(out_dir) / SHARDS_DIR / self.folder_name

    def owns(self, task: str, length: int | None, example_id: str) -> bool:
        """Whether this shard asks question `example_id` of `task` at `length`."""
        key = json.dumps([task, length, example_id], ensure_ascii=False).encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % self.count == self.index


def shard_from_environment(environ: Mapping[str, str] | None = None) -> Shard | None:
    """The shard of this process when a launcher started several (``RANK`` of ``WORLD_SIZE``, as
    ``accelerate launch`` and ``torchrun`` set them); None for a single process."""
    environ = os.environ if environ is None else environ
    world = environ.get("WORLD_SIZE")
    if world is None or int(world) <= 1:
        return None
    rank = environ.get("RANK")
    if rank is None:
        raise ConfigError(f"WORLD_SIZE={world} but RANK is not set: launch with accelerate launch or torchrun, "
                          "or give shard=I/N")
    return Shard(int(rank), int(world))


def local_device(device: str, environ: Mapping[str, str] | None = None) -> str:
    """The GPU of this process among several on one node: ``cuda`` -> ``cuda:LOCAL_RANK`` (any other
    device, or a single process, as given)."""
    environ = os.environ if environ is None else environ
    local = environ.get("LOCAL_RANK")
    if device != "cuda" or local is None or int(environ.get("WORLD_SIZE", "1")) <= 1:
        return device
    return f"cuda:{int(local)}"


def part_key(task: str, length: int | None) -> str:
    return f"{task}@{length}"


class ShardManifest:
    """``shard.json`` of one shard's folder: the parts it has built, and whether it has finished."""

    def __init__(self, directory: str | os.PathLike[str], shard: Shard):
        self.path = Path(directory) / MANIFEST_FILE
        self.shard = shard
        data = json.loads(self.path.read_text(encoding="utf-8")) if self.path.is_file() else {}
        if data and data.get("shard") != str(shard):
            raise ConfigError(f"{self.path} belongs to shard {data.get('shard')}, not {shard}; "
                              "remove that folder or choose another out_dir")
        self.parts: dict[str, dict[str, Any]] = data.get("parts", {})
        self.complete: bool = bool(data.get("complete"))

    def part(self, task: str, length: int | None) -> dict[str, Any] | None:
        return self.parts.get(part_key(task, length))

    def record_part(self, task: str, length: int | None, requested: int, example_ids: list[str],
                    owned: list[str]) -> None:
        """Say which examples the run built for `task` at `length` (`requested` of them asked for), and
        which of them this shard asks."""
        self.parts[part_key(task, length)] = {"task": task, "length": length, "requested": requested,
                                              "example_ids": list(example_ids), "owned": list(owned)}
        self.complete = False
        self._write()

    def finish(self) -> None:
        self.complete = True
        self._write()

    def _write(self) -> None:
        payload = {"shard": str(self.shard), "complete": self.complete, "parts": self.parts}
        atomic_write_text(self.path, json.dumps(payload, indent=1, ensure_ascii=False) + "\n")


def shard_folders(out_dir: str | os.PathLike[str]) -> dict[int, set[int]]:
    """Shard count -> the indices of the shard folders under ``OUT/shards/``."""
    root = Path(out_dir) / SHARDS_DIR
    found: dict[int, set[int]] = {}
    if root.is_dir():
        for entry in root.iterdir():
            match = _FOLDER.match(entry.name)
            if match and entry.is_dir():
                found.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    return found
