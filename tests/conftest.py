"""Tests marked `cuda` need a CUDA GPU: they run wherever torch sees one and are skipped elsewhere
(`pytest -m cuda` selects them on a GPU machine)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
