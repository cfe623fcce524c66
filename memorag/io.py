"""Small file helpers shared by the package.

Writes are atomic: the data goes to a temporary file in the target's folder and
is then moved over the target with `os.replace`, so a reader never sees a
half-written file and a crash leaves the old version in place.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
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
    """Build a directory in a temporary sibling, then move it into place.

    Yields the temporary folder to write into. On success it replaces `path` (an
    existing directory there is moved aside first and removed after the swap); on
    error the temporary folder is removed and `path` is left as it was. A non-empty
    existing directory is replaced only if `replaceable(path)` says it is one of
    ours, so a wrong path cannot wipe unrelated files.
    """
    target = Path(path)
    if target.exists():
        if not target.is_dir():
            raise FileExistsError(f"{target} exists and is not a directory")
        if replaceable is not None and any(target.iterdir()) and not replaceable(target):
            raise FileExistsError(f"{target} is a non-empty directory of other content; choose another path")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        yield staging
        if target.exists():
            old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old"))
            os.replace(target, old / "previous")
            os.replace(staging, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


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
