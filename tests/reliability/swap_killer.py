"""Run a writer that kills itself (SIGKILL, as an OOM kill or a power cut would end it) at one
named step of swapping a save into place, deterministically:

    python tests/reliability/swap_killer.py SWAP STEP TARGET fake DOC...
    python tests/reliability/swap_killer.py SWAP STEP TARGET cli memorize FILE --out TARGET ...

SWAP: "exchange" (the one-step `renameat2` swap) or "renames" (the two-rename swap, as on a
system without it). STEP: `before-move-N` / `after-move-N` (the N-th rename that moves the
save's folder: the exchange, or the renames of the old and the new folder), or `mid-removal`
(half-way through removing the folder that the swap moved aside). `fake` writes a fake save:
a folder holding one file per document, the old save's documents plus DOC...
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import memorag.storage.io as io

STEPS = {"exchange": ("before-move-1", "after-move-1", "mid-removal"),
         "renames": ("before-move-1", "after-move-1", "after-move-2", "mid-removal")}


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(swap: str, step: str, target: Path) -> None:
    """Make the moves of `target`'s folder, and the removal after them, die at `step`."""
    if swap == "renames":
        io._renameat2 = None
    moved = [0]

    def counted(move):
        def wrapper(source, destination, *args, **kwargs):
            touches = str(target) in (os.path.abspath(source), os.path.abspath(destination))
            if touches and step == f"before-move-{moved[0] + 1}":
                die()
            result = move(source, destination, *args, **kwargs)
            if touches and result is not False:  # False: no exchange on this system, nothing moved
                moved[0] += 1
                if step == f"after-move-{moved[0]}":
                    die()
            return result
        return wrapper

    real_rmtree = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        left = Path(path)
        if step == "mid-removal" and moved[0] and io.temporary_pattern(target).fullmatch(left.name):
            files = sorted(file for file in left.rglob("*") if file.is_file())
            for file in files[: max(1, len(files) // 2)]:
                file.unlink()
            die()
        return real_rmtree(path, *args, **kwargs)

    io.rename_exchange = counted(io.rename_exchange)
    os.rename = counted(os.rename)
    shutil.rmtree = rmtree


def write_fake(target: Path, documents: list[str]) -> None:
    """A fake save: the documents of the save at `target` (if any) and `documents`, one file each."""
    from memorag.storage.locking import save_lock

    with save_lock(target), io.atomic_directory(target) as staging:
        old = sorted(path.name for path in target.iterdir()) if target.is_dir() else []
        for name in [*old, *documents]:
            (staging / name).write_text(f"the text of {name}\n" * 50)


def main(argv: list[str]) -> int:
    swap, step, target, kind, *rest = argv
    target_path = Path(os.path.abspath(target))
    if step not in STEPS[swap]:
        raise SystemExit(f"no step {step!r} in a {swap} swap: {STEPS[swap]}")
    install(swap, step, target_path)
    if kind == "fake":
        write_fake(target_path, rest)
        return 0
    from memorag.commands.main import main as cli_main

    return cli_main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
