"""Small file helpers shared by the package.

Writes are atomic: the data goes to a temporary file (or folder) in the target's
folder and is then moved over the target, so a reader never sees a half-written
file and a crash at any instant leaves a complete version, old or new (a folder
swap killed half-way is restored by `recover_swap`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` atomically, creating parent folders; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Write `text` to `path` atomically (see `atomic_write_bytes`); returns the path."""
    return atomic_write_bytes(path, text.encode(encoding))


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str], replaceable: Callable[[Path], bool] | None = None):
    """Build a directory in a temporary sibling, then swap it into place.

    Yields the temporary folder to write into. On success its files are flushed to disk and it
    replaces `path` (see `swap_directory`); on error it is removed and `path` is left as it
    was. A non-empty existing directory is replaced only if `replaceable(path)` says it is one
    of ours, so a wrong path cannot wipe unrelated files. A save that an earlier writer left
    half-swapped is restored first (`recover_swap`).
    """
    target = Path(path)
    recover_swap(target)
    if target.exists():
        if not target.is_dir():
            raise FileExistsError(f"{target} exists and is not a directory")
        if replaceable is not None and any(target.iterdir()) and not replaceable(target):
            raise FileExistsError(f"{target} is a non-empty directory of other content; choose another path")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        yield staging
        _sync_tree(staging)
        swap_directory(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def swap_directory(staging: Path, target: Path) -> None:
    """Put the complete folder `staging` at `target`, so that a crash at any instant leaves a
    complete save at `target` (the old one or the new one) or one `recover_swap` restores.

    Where the system can (Linux `renameat2(RENAME_EXCHANGE)`, on the file systems that support
    it), the two folders trade places in one atomic step: `target` is never missing, not even
    for a reader running at the same time, and `staging` then holds the old save, which the
    caller removes. Elsewhere the swap takes two renames: the old folder moves to
    `.NAME.XXXXXXXX.old/previous`, then the new one into place. A writer killed between them
    leaves `target` missing with the old save complete under `.old/previous`, which
    `recover_swap` moves back; nothing deletes an `.old` folder while `target` is missing.
    An exchange is chosen over versioned folders behind a pointer because the save keeps its
    plain layout (one folder, readable by older versions and by hand).
    """
    if not target.exists():
        os.rename(staging, target)
    elif not rename_exchange(staging, target):
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old"))
        os.rename(target, old / PREVIOUS)
        os.rename(staging, target)
        shutil.rmtree(old, ignore_errors=True)
    _sync_folder(target.parent)


PREVIOUS = "previous"  # the old save's name inside `.NAME.XXXXXXXX.old` during a two-rename swap
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_NOT_SUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}  # no such call, or not on this file system


def _load_renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_renameat2 = _load_renameat2()


def rename_exchange(first: Path, second: Path) -> bool:
    """Atomically trade the names of two existing paths; False where the system or the file
    system cannot (then nothing has moved). Other failures raise `OSError`."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NOT_SUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(first), None, str(second))


def temporary_pattern(target: Path) -> re.Pattern[str]:
    """Names of the temporary folders a swap into `target` makes (`.NAME.XXXXXXXX.tmp/.old`)."""
    return re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.(tmp|old)")


def interrupted_swaps(target: str | os.PathLike[str]) -> list[Path]:
    """The old saves (`.NAME.XXXXXXXX.old/previous`) that two-rename swaps into `target` left,
    newest last."""
    target = Path(os.path.abspath(target))
    if not target.parent.is_dir():
        return []
    pattern = temporary_pattern(target)
    found = [entry / PREVIOUS for entry in target.parent.iterdir()
             if entry.name.endswith(".old") and pattern.fullmatch(entry.name) and (entry / PREVIOUS).is_dir()]
    return sorted(found, key=lambda previous: previous.parent.stat().st_mtime)


def interrupted_targets(folder: str | os.PathLike[str]) -> list[Path]:
    """The missing save folders in `folder` that a two-rename swap left an old save of."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    named = (folder / entry.name[1:-len(".XXXXXXXX.old")] for entry in folder.iterdir()
             if entry.name.startswith(".") and entry.name.endswith(".old"))
    return sorted({target for target in named if target.name and not target.exists() and interrupted_swaps(target)})


def recover_swap(target: str | os.PathLike[str]) -> Path | None:
    """Move back the save a writer killed between the two renames of a swap left aside, when
    `target` is missing; returns where it was, or None when there was nothing to restore.

    The newest complete save so made is the old one (the new one was never put in place, and
    its folder is removed as the dead writer's `.tmp`). Safe to run by several processes at
    once: one moves it, the others find it gone. Run it without a lock only where no writer
    of `target` may be between its two renames (it would make that writer fail, loudly)."""
    target = Path(target)
    if target.exists() or target.is_symlink():
        return None
    for previous in reversed(interrupted_swaps(target)):
        try:
            os.rename(previous, target)
        except FileNotFoundError:  # another process restored it first
            continue
        except OSError as error:
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST):  # the target appeared meanwhile
                return None
            raise
        _sync_folder(target.parent)
        return previous
    return None


def _sync_tree(folder: Path) -> None:
    """Flush every file and folder under `folder` to disk, so that a power cut after the swap
    cannot leave a save whose files are empty."""
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    for path in [folder, *(path for path in folder.rglob("*") if path.is_dir() and not path.is_symlink())]:
        _sync_folder(path)


def _sync_folder(folder: Path) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def read_json_manifest(
    path: str | os.PathLike[str], fmt: str, version: int, error: type[Exception] = ValueError, remedy: str = ""
) -> dict[str, Any]:
    """Read a JSON manifest and check its `format` and `format_version`, raising `error`
    (its message ends with `remedy`, what to do about it, when given)."""
    manifest_path = Path(path)
    fix = f"; {remedy}" if remedy else ""
    if not manifest_path.is_file():
        raise error(f"{manifest_path} is missing; this is not a saved {fmt}")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as problem:
        raise error(f"{manifest_path} is not valid JSON ({problem}); the {fmt} is corrupt{fix}") from problem
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        raise error(f"{manifest_path} does not describe a {fmt}")
    if manifest.get("format_version") != version:
        raise error(
            f"{manifest_path} has {fmt} format version {manifest.get('format_version')!r}; this code reads "
            f"version {version}{fix}"
        )
    return manifest


def is_saved(directory: str | os.PathLike[str], manifest_name: str, fmt: str) -> bool:
    """Whether `directory` holds a manifest of format `fmt` (a save we may replace)."""
    try:
        manifest = json.loads((Path(directory) / manifest_name).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == fmt


def sha256_file(path: str | os.PathLike[str], chunk_size: int = 1 << 22) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_size), b""):
            digest.update(block)
    return digest.hexdigest()
