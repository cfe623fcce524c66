"""Files in hashed parts of bounded size: how a time-boxed run's inputs go to a GPU machine and its results come back.

A bundle is one tar of named files (xz-compressed or stored), cut into parts of at most
`part_bytes` beside a manifest (`NAME.manifest.json`) that records each part's size and
sha256 and the whole tar's. Parts may arrive over several commands and from several
folders; `unbundle` checks every part and the whole before it extracts anything, so a
missing, truncated or altered part is named, never half-used.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

MANIFEST_SUFFIX = ".manifest.json"
MIB = 1 << 20


class BundleError(ValueError):
    """A bundle that cannot be made within its limits, or parts that do not match their manifest."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bundle(files: Mapping[str, str | Path], out_dir: str | Path, name: str, part_bytes: int,
           compress: bool = True, max_files: int | None = None) -> list[Path]:
    """Write `files` (name in the bundle -> path) as NAME.partNN and NAME.manifest.json in `out_dir`.

    Returns the written paths; refuses (before writing) a bundle whose parts and manifest
    would be more than `max_files` files.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz" if compress else "w", format=tarfile.PAX_FORMAT) as tar:
        for arcname in sorted(files):
            info = tar.gettarinfo(str(files[arcname]), arcname=arcname)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""  # the same bytes every time
            with open(files[arcname], "rb") as handle:
                tar.addfile(info, handle)
    data = buffer.getvalue()
    pieces = [data[start : start + part_bytes] for start in range(0, len(data), part_bytes)] or [b""]
    if max_files is not None and len(pieces) + 1 > max_files:
        raise BundleError(f"{name}: {len(data):,} bytes make {len(pieces)} parts of at most {part_bytes:,} bytes "
                          f"and a manifest, more than the {max_files} files allowed; bring back less")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for index, piece in enumerate(pieces):
        path = out / f"{name}.part{index:02d}"
        path.write_bytes(piece)
        written.append(path)
    manifest = {"name": name, "compressed": compress, "bytes": len(data), "sha256": _sha256(data),
                "parts": [{"file": p.name, "bytes": len(b), "sha256": _sha256(b)} for p, b in zip(written, pieces)],
                "files": sorted(files)}
    manifest_path = out / f"{name}{MANIFEST_SUFFIX}"
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return [*written, manifest_path]


def _find(file: str, folders: Sequence[Path]) -> Path | None:
    return next((folder / file for folder in folders if (folder / file).is_file()), None)


def check_parts(name: str, folders: Sequence[str | Path]) -> tuple[dict, list[str]]:
    """The manifest of bundle `name` and what is wrong with its parts in `folders` (empty: all present and intact)."""
    folders = [Path(f) for f in folders]
    manifest_path = _find(f"{name}{MANIFEST_SUFFIX}", folders)
    if manifest_path is None:
        return {}, [f"{name}{MANIFEST_SUFFIX} is in none of {', '.join(map(str, folders))}"]
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    problems = []
    for part in manifest["parts"]:
        path = _find(part["file"], folders)
        if path is None:
            problems.append(f"{part['file']} is missing")
        elif path.stat().st_size != part["bytes"] or _sha256(path.read_bytes()) != part["sha256"]:
            problems.append(f"{part['file']} differs from its manifest (size or sha256)")
    return manifest, problems


def unbundle(name: str, folders: Sequence[str | Path], dest: str | Path) -> list[Path]:
    """Check every part of bundle `name` (found in any of `folders`), join them, check the whole, extract into `dest`."""
    manifest, problems = check_parts(name, folders)
    if problems:
        raise BundleError(f"bundle {name}: " + "; ".join(problems))
    data = b"".join(_find(part["file"], [Path(f) for f in folders]).read_bytes() for part in manifest["parts"])
    if len(data) != manifest["bytes"] or _sha256(data) != manifest["sha256"]:
        raise BundleError(f"bundle {name}: the joined parts differ from the manifest's sha256")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        tar.extractall(dest, filter="data")
    return [dest / file for file in manifest["files"]]
