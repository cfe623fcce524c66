"""RLGF's pair build in processes side by side. A process decoding a small memory model keeps a CPU's cores only
partly busy (its steps are small), so N processes with 1/N of the threads each build more questions an hour
(docs/training.md, "The pairs"). Each builds every N-th question (`build_pairs`' share) into shards of its own;
this process builds the first share, waits for the others and finishes the build. A share that stops keeps what
it built: the same command goes on where each share stopped, with any number of processes."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memorag.config import ConfigError
from memorag.runtime.placement import set_threads

from .rlgf_pairs import PairModels, build_from_config


def build_share(cfg, out: Path, share: tuple[int, int], threads: int, parent: int) -> None:
    """One share of the build, in a process of its own (the target `build_with_processes` starts), which stops
    after its question once the process `parent` that started it is gone (killed: it cannot stop its shares)."""
    set_threads(threads)
    build_from_config(cfg, out, share=share, on_question=lambda record: stop_if_orphaned(parent))


def stop_if_orphaned(parent: int) -> None:
    """Stop this process (exit code 0, what it built kept) when its parent is no longer `parent`."""
    if os.getppid() != parent:
        raise SystemExit(0)


def build_with_processes(cfg, out: Path, processes: int, models: PairModels | None = None,
                         target: Callable[..., None] = build_share) -> dict[str, Any]:
    """The pairs of `cfg` into `out` (`build_from_config`), built by `processes` processes side by side: this one
    and `processes` - 1 started by spawning (`target`, each loading its own models), the threads shared out."""
    import torch

    if processes < 1:
        raise ConfigError(f"processes={processes} must be at least 1")
    if processes == 1:
        return build_from_config(cfg, out, models=models)
    threads = max(1, torch.get_num_threads() // processes)
    context = multiprocessing.get_context("spawn")
    others = [context.Process(target=target, args=(cfg, out, (index, processes), threads, os.getpid()), daemon=True,
                              name=f"rlgf-pairs-share-{index + 1}") for index in range(1, processes)]
    for process in others:
        process.start()

    def join() -> None:
        for process in others:
            process.join()
        failed = [f"share {index + 2} of {processes} (exit code {process.exitcode})"
                  for index, process in enumerate(others) if process.exitcode != 0]
        if failed:
            raise RuntimeError(f"{', '.join(failed)} stopped (its error is above); the questions built so far are "
                               "kept: run the same command again, it goes on where each share stopped")

    try:
        set_threads(threads)
        return build_from_config(cfg, out, models=models, share=(0, processes), before_finish=join)
    finally:
        for process in others:
            if process.is_alive():
                process.terminate()
                process.join()
