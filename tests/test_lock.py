"""The environment `make setup` built is the one the lock describes (requirements/*.txt).

A `.venv` made from an older lock, or changed by hand, fails here naming each package that
differs, so a suite cannot pass on versions nobody locked. Environments that `make setup` did
not build (a user's own, `make test-latest`'s throwaway one) are not held to the lock.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.lockfile import STAMP_NAME, compare, installed_versions, locked_versions

ROOT = Path(__file__).resolve().parents[1]
LOCKS = [ROOT / "requirements" / "lock.txt", ROOT / "requirements" / "data.txt", ROOT / "requirements" / "uv.txt"]


def test_the_environment_is_the_lock():
    stamp = Path(sys.prefix) / STAMP_NAME
    if not stamp.is_file():
        pytest.skip(f"{sys.prefix} was not built by `make setup` (no {STAMP_NAME}); it is not held to the lock")
    expected = locked_versions(LOCKS, stamp)
    differences = compare(expected, installed_versions())
    assert not differences, (
        f"the environment {sys.prefix} differs from the lock (requirements/*.txt):\n  " + "\n  ".join(differences)
        + "\nrebuild it: rm -rf " + sys.prefix + " && make setup"
    )


def test_a_difference_from_the_lock_is_named(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("# made by make lock\nfoo-bar==1.2.0 \\\n    --hash=sha256:00\n    # via x\nbaz==2.0\n",
                    encoding="utf-8")
    stamp = tmp_path / STAMP_NAME
    stamp.write_text("torch==2.13.0\n", encoding="utf-8")
    expected = locked_versions([lock], stamp)
    assert expected == {"foo-bar": "1.2.0", "baz": "2.0", "torch": "2.13.0"}
    same = {"foo-bar": "1.2.0", "baz": "2.0", "torch": "2.13.0+cpu", "pip": "25.0", "memorag-open": "0.1.0"}
    assert compare(expected, same) == []
    found = compare(expected, {"Foo_Bar": "1.3.0", "torch": "2.14.0", "extra-thing": "0.1", "pip": "25.0"})
    assert found == [
        "baz: locked 2.0, not installed",
        "extra-thing: installed 0.1, not in the lock",
        "foo-bar: locked 1.2.0, installed 1.3.0",
        "torch: locked 2.13.0, installed 2.14.0",
    ]


def test_installed_versions_reads_this_environment():
    versions = installed_versions()
    assert versions["pytest"] == metadata.version("pytest")
