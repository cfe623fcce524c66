"""The data sets moved to `memorag.evaluation.datasets`; their old names under `memorag.evaluation.tasks` still
import, and give the very same objects (nothing is defined twice)."""

from __future__ import annotations

import importlib

import pytest

MOVED = ["schema", "lengths", "assembly", "packaged", "filler", "hotpotqa", "synthetic", "squad"]


@pytest.mark.parametrize("name", MOVED)
def test_the_old_module_name_re_exports_the_moved_module(name):
    moved = importlib.import_module(f"memorag.evaluation.datasets.{name}")
    old = importlib.import_module(f"memorag.evaluation.tasks.{name}")
    public = [attribute for attribute in vars(moved) if not attribute.startswith("_")]
    defined_here = [attribute for attribute in public if getattr(getattr(moved, attribute), "__module__", None)
                    == moved.__name__]
    assert defined_here  # the module defines something of its own
    assert all(getattr(old, attribute) is getattr(moved, attribute) for attribute in public)
