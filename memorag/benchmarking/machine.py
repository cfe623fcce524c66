"""The machine a measurement ran on, as the benchmarks and the evaluation report record it.

Speeds are only comparable on the same machine under the same load, so every
benchmark writes `machine_record()` beside its figures: the processor's name, cores,
torch's threads and version, and the load averages before and after the run.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpu_model() -> str:
    """The processor's name as the kernel reports it (``model name``), or the platform's guess."""
    try:
        for line in CPUINFO.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded."""
    return [round(value, 2) for value in os.getloadavg()]


def machine_record(load_before: list[float] | None = None) -> dict:
    """What a benchmark's JSON says of its machine; `load_before`: `load_average()` taken at its start."""
    import torch

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(),
            "load_average_before": load_before, "load_average_after": load_average()}
