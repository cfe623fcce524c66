"""Counting the reads of a tensor's value on the host (each waits for the device on a GPU), by the file
of the code that asked for it: shared by the trainer-step and memorize tests."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import torch

# the Tensor methods that hand a value to Python: on a GPU each waits for the device
READS = ("item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__")
PROJECT = str(Path(__file__).resolve().parents[1] / "memorag")


def count_reads(monkeypatch) -> Counter:
    """Patch the reads; the returned counter is keyed by (read, file of the code that asked for it)."""
    seen: Counter = Counter()
    for name in READS:
        original = getattr(torch.Tensor, name)

        def read(tensor, *args, _name=name, _original=original, **kwargs):
            seen[(_name, sys._getframe(1).f_code.co_filename)] += 1
            return _original(tensor, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, read)
    return seen


def project_reads(seen: Counter) -> dict[tuple[str, str], int]:
    """The reads asked for by code under memorag/, keyed by (read, path relative to memorag/)."""
    return {(name, str(Path(path).relative_to(PROJECT))): count for (name, path), count in seen.items()
            if path.startswith(PROJECT)}
