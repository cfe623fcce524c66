"""One writer at a time per save folder: an advisory lock beside the folder.

    with save_lock("book.mrag", wait=300):
        ... read the old save, build the new one, move it into place ...

The lock is `fcntl.flock` on `.NAME.lock` in the folder's parent (the save folder itself is
replaced by a rename, so the lock cannot live inside it). The holder writes who it is into the
lock file, so a writer that has to wait can name it. The operating system drops the lock when
its holder exits, even by `kill -9`, so a dead writer never blocks the next one; that next
writer first restores the save if the dead one was killed half-way through swapping it in
(`memorag.storage.io.recover_swap`), then removes the temporary folders (`.NAME.XXXXXXXX.tmp` /
`.old`) it left. A reader that finds a save missing calls `recover_save`, which does the same
restoring under the lock. The
lock file is never deleted (deleting it would let two writers lock two different files).
Taking the lock again in the process that holds it is allowed (the lock is re-entrant).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from memorag.storage.io import interrupted_swaps, recover_swap, temporary_pattern

# How often a waiting writer retries, and how often it says that it is still waiting.
POLL_SECONDS = 0.2
NOTICE_SECONDS = 10.0

_held: dict[str, int] = {}  # lock file path -> depth, for the locks this process holds


class SaveLockedError(RuntimeError):
    """Another writer holds a save's lock for longer than we were willing to wait; `holder` says who."""

    def __init__(self, message: str, holder: str = "another process") -> None:
        super().__init__(message)
        self.holder = holder


def lock_path(directory: str | os.PathLike[str]) -> Path:
    """The lock file of a save folder: `.NAME.lock` beside it."""
    target = Path(os.path.abspath(directory))
    return target.parent / f".{target.name}.lock"


def _describe_holder(handle) -> str:
    handle.seek(0)
    try:
        holder = json.loads(handle.read() or "{}")
    except json.JSONDecodeError:
        holder = {}
    if not holder:
        return "another process"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
    return f"process {holder.get('pid')} on {holder.get('host')} ({holder.get('command', '?')}, since {since})"


def stale_temporaries(directory: str | os.PathLike[str]) -> list[Path]:
    """Temporary folders a writer of `directory` leaves while it works (`.NAME.XXXXXXXX.tmp/.old`).

    Only call this while holding the save's lock: then no live writer owns them. While the
    save itself is missing, an `.old` folder holding the previous save is not one of them
    (it is the only complete copy; `recover_swap` puts it back)."""
    target = Path(os.path.abspath(directory))
    pattern = temporary_pattern(target)
    if not target.parent.is_dir():
        return []
    keep = set() if target.exists() else {previous.parent for previous in interrupted_swaps(target)}
    return sorted(path for path in target.parent.iterdir() if pattern.fullmatch(path.name) and path.is_dir()
                  and not path.is_symlink() and path not in keep)


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


@contextlib.contextmanager
def save_lock(
    directory: str | os.PathLike[str],
    wait: float = 300.0,
    notify: Callable[[str], None] | None = None,
) -> Iterator[Path]:
    """Hold the writer's lock of save folder `directory` for the block.

    Waits at most `wait` seconds for another writer (telling `notify`, default stderr, whom it
    waits for), then raises `SaveLockedError` naming the holder. On taking the lock, removes
    the temporary folders of writers that died while writing this save.
    """
    if not isinstance(wait, int | float) or isinstance(wait, bool) or not wait >= 0:
        raise ValueError(f"wait={wait!r} must be a number of seconds, 0 or more")
    path = lock_path(directory)
    key = str(path)
    if key in _held:  # this process holds it already
        _held[key] += 1
        try:
            yield path
        finally:
            _held[key] -= 1
        return
    notify = notify or (lambda message: print(message, file=sys.stderr, flush=True))
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held across the yield
    try:
        _wait_for_lock(handle, directory, path, wait, notify)
        _claim(handle)
        _clean_after_dead_writers(directory, notify)
        _held[key] = 1
        try:
            yield path
        finally:
            del _held[key]
            handle.seek(0)
            handle.truncate()
            handle.flush()
    finally:
        handle.close()  # closing drops the lock


def _wait_for_lock(handle: IO[str], directory: str | os.PathLike[str], path: Path, wait: float,
                   notify: Callable[[str], None]) -> None:
    """Take the lock on `handle`'s file, waiting at most `wait` seconds (telling `notify` whom it
    waits for, every `NOTICE_SECONDS`); raises `SaveLockedError` naming the holder."""
    started = time.monotonic()
    told = None
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
        waited = time.monotonic() - started
        holder = _describe_holder(handle)
        if waited >= wait:
            raise SaveLockedError(
                f"{directory} is being written by {holder}; gave up after waiting {waited:.0f} s. Run the "
                f"command again when that writer is done (it holds {path}), or wait longer (--wait SECONDS)",
                holder,
            ) from None
        if told is None or time.monotonic() - told >= NOTICE_SECONDS:
            notify(f"waiting for {holder} to finish writing {directory} (at most {wait:.0f} s)...")
            told = time.monotonic()
        time.sleep(POLL_SECONDS)


def _claim(handle: IO[str]) -> None:
    """Write who holds the lock (process, host, since, command) into the lock file."""
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                             "command": " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:3])[:120]}))
    handle.flush()


def _clean_after_dead_writers(directory: str | os.PathLike[str], notify: Callable[[str], None]) -> None:
    """Put back a save a killed writer left half swapped, and remove the temporary folders of
    writers that died while writing."""
    restored = recover_swap(directory)
    if restored is not None:
        notify(f"restored {directory} from {restored.parent.name}, left by a writer that was killed while "
               "putting its save in place")
    for stale in stale_temporaries(directory):
        size = _folder_bytes(stale)
        shutil.rmtree(stale, ignore_errors=True)
        notify(f"removed {stale.name} ({size / 1e6:.1f} MB), left by a writer of {directory} that did not finish")


def recover_save(directory: str | os.PathLike[str], wait: float = 60.0,
                 notify: Callable[[str], None] | None = None) -> bool:
    """For a reader: if save folder `directory` is missing because its writer was killed while
    swapping it in, restore the previous save (under the writer's lock, so no live writer is
    disturbed); returns whether there was one to restore. Cheap when the save is there."""
    target = Path(directory)
    if target.exists() or not interrupted_swaps(target):
        return False
    with save_lock(target, wait, notify=notify):  # taking the lock restores it
        return target.exists()
