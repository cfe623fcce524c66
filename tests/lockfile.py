"""Reading the lock (requirements/*.txt, written by `make lock`) and comparing an environment with it."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

STAMP_NAME = ".memorag-setup.stamp"  # written by `make setup`; holds the torch pin (torch==X)
# installed beside the lock by the tools themselves, or the project
NOT_LOCKED = frozenset({"pip", "setuptools", "wheel", "memorag-open"})
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def normalize(name: str) -> str:
    """A distribution's name as the registries compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(locks: list[Path], stamp: Path) -> dict[str, str]:
    """Each locked distribution's version; torch's comes from the stamp (pip installs it first)."""
    versions: dict[str, str] = {}
    for path in [*locks, stamp]:
        for line in path.read_text(encoding="utf-8").splitlines():
            match = _PIN.match(line)
            if match:
                versions[normalize(match.group(1))] = match.group(2)
    return versions


def installed_versions() -> dict[str, str]:
    """Each distribution installed in the running interpreter's environment."""
    return {normalize(dist.metadata["Name"]): dist.version for dist in metadata.distributions()}


def _same(locked: str, installed: str) -> bool:
    # a local build label (torch's "+cpu") is the same release as the pin without it
    return installed == locked or installed.split("+", 1)[0] == locked


def compare(expected: dict[str, str], installed: dict[str, str]) -> list[str]:
    """One line per difference between the lock and the environment, sorted by package."""
    installed = {normalize(name): version for name, version in installed.items()}
    lines = []
    for name in sorted(set(expected) | set(installed)):
        if name in NOT_LOCKED:
            continue
        if name not in installed:
            lines.append(f"{name}: locked {expected[name]}, not installed")
        elif name not in expected:
            lines.append(f"{name}: installed {installed[name]}, not in the lock")
        elif not _same(expected[name], installed[name]):
            lines.append(f"{name}: locked {expected[name]}, installed {installed[name]}")
    return lines
