"""Which files a list of paths names, and whether each may be opened: folders walked once
(linear in their files), every file checked with `lstat` before it is opened.

Refused by name, never opened: a FIFO, a device or a socket (opening a FIFO blocks, a device
never ends); a link found in a folder that leads out of it (to /etc/passwd, /proc/self/environ
or /dev/zero), unless links are followed (`ReadOptions.follow_links`); a file whose name is not
UTF-8. An unreadable subfolder is named; a link to a folder is walked only when links are
followed, and never twice.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from memorag.documents.errors import DocumentReadError
from memorag.documents.options import ReadOptions

# Files a folder walk passes over unless an --include pattern names them: hidden files and folders
# (.git, .venv) are never walked into; these are skipped as not documents.
DEFAULT_EXCLUDE = (".*", "*~", "*.pyc", "__pycache__", "*.memorag")
_KINDS = ((stat.S_ISFIFO, "a FIFO (a named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


@dataclass
class Walked:
    """The files found, each with the folder it was found in (None: given as a file), and the
    paths that could not be walked."""

    files: list[tuple[Path, Path | None]] = field(default_factory=list)
    problems: list[DocumentReadError] = field(default_factory=list)


def shown(path: str | os.PathLike[str]) -> str:
    """`path` as a message can print it: bytes that are not UTF-8 escaped (`\\xe9`)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def walk(paths: list[str | os.PathLike[str]], options: ReadOptions) -> Walked:
    """The files `paths` name: files as given, folders walked (sorted, recursively) through the
    include and exclude patterns. A path that does not exist is kept, to be reported when read."""
    walked = Walked()
    for path in map(Path, paths):
        if not path.is_dir():
            walked.files.append((path, None))
            continue
        before = len(walked.files)
        _walk_folder(path, options, walked)
        if len(walked.files) == before:
            walked.problems.append(DocumentReadError(shown(path), "holds no files to read",
                                                     "check the folder, or its --include/--exclude patterns"))
    return walked


def _walk_folder(root: Path, options: ReadOptions, walked: Walked) -> None:
    def unreadable(error: OSError) -> None:
        walked.problems.append(DocumentReadError(shown(error.filename or root), f"cannot be read "
                                                 f"({error.strerror or error}); its files are left out",
                                                 "check its permissions"))

    seen_root = os.path.realpath(root)
    seen = {seen_root}
    for folder, subfolders, names in os.walk(root, onerror=unreadable, followlinks=options.follow_links):
        kept = []
        for name in sorted(subfolders):
            if _excluded(name, name, options, folder=True):
                continue
            real = os.path.realpath(os.path.join(folder, name))
            if not options.follow_links and os.path.islink(os.path.join(folder, name)):
                if not Path(real).is_relative_to(seen_root):  # inside, its files are read where they are
                    walked.problems.append(DocumentReadError(
                        shown(os.path.join(folder, name)), f"is a link leading out of the folder (to {shown(real)}); "
                        "its files are left out", "give that folder itself, or follow links (--follow-links)"))
                continue
            if real not in seen:  # a link back up the tree, or to a folder already walked
                seen.add(real)
                kept.append(name)
        subfolders[:] = kept
        for name in sorted(names):
            relative = os.path.relpath(os.path.join(folder, name), root)
            if not _excluded(name, relative, options):
                walked.files.append((Path(folder) / name, root))


def _excluded(name: str, relative: str, options: ReadOptions, folder: bool = False) -> bool:
    matches = lambda patterns: any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(relative, p) for p in patterns)
    if matches(options.exclude) or (matches(DEFAULT_EXCLUDE) and not (options.include and matches(options.include))):
        return True
    return bool(options.include) and not folder and not matches(options.include)


def openable(path: Path, root: Path | None, options: ReadOptions) -> str:
    """The path to open for the file at `path` (found in the folder `root`, or given: None), after
    the checks above and the size limit; refused with `DocumentReadError` otherwise."""
    name = shown(path)
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        raise DocumentReadError(name, "has a name that is not valid UTF-8", "rename it") from None
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise DocumentReadError(name, "no such file", "check the path") from None
    except OSError as error:
        raise DocumentReadError(name, f"cannot be read ({error.strerror or error})", "check its permissions") from None
    target = path
    if stat.S_ISLNK(info.st_mode):
        target = Path(os.path.realpath(path))
        if root is not None and not options.follow_links and not target.is_relative_to(os.path.realpath(root)):
            raise DocumentReadError(name, f"is a link leading out of the folder (to {shown(target)})",
                                    "give the file itself, or follow links (--follow-links)")
        try:
            info = os.stat(target)
        except OSError as error:
            raise DocumentReadError(name, f"is a link to {shown(target)}, which cannot be read "
                                          f"({error.strerror or error})", "fix or remove the link") from None
    if stat.S_ISDIR(info.st_mode):
        raise DocumentReadError(name, "is a folder", "give its files, or memorize the folder")
    for test, what in _KINDS:
        if test(info.st_mode):
            raise DocumentReadError(name, f"is {what}, not a regular file", "give a regular file")
    options.check_size(info.st_size, name)
    return os.fspath(target)
