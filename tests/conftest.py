"""Tests marked `cuda` need a CUDA GPU: they run wherever torch sees one and are skipped elsewhere
(`pytest -m cuda` selects them on a GPU machine). Tests marked `inductor` compile with torch's
inductor backend (a minute or more on 2 CPU cores): they run when `-m` names them
(`pytest -m inductor`, or `-m "cuda or inductor"`) and are skipped otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memorag.storage.cache_root import CACHE_VARIABLE, DEPRECATED_CACHE_VARIABLE, cache_home

_USER_MODELS = cache_home() / "models"  # the user's converted models, shared by every test's cache


def isolated_cache(folder: Path) -> Path:
    """`folder` made a cache root of its own (nothing asked or gisted yet) that shares the user's converted
    models (its `models/` links to theirs), so that a test's cache converts no model again."""
    folder.mkdir(parents=True, exist_ok=True)
    _USER_MODELS.mkdir(parents=True, exist_ok=True)
    if not (folder / "models").exists():
        os.symlink(_USER_MODELS, folder / "models", target_is_directory=True)
    return folder


def pytest_collection_modifyitems(config, items) -> None:
    import torch

    if "inductor" not in (config.getoption("markexpr") or ""):
        skip_inductor = pytest.mark.skip(reason="compiles with inductor (a minute or more on 2 cores): "
                                                "run with `pytest -m inductor`")
        for item in items:
            if "inductor" in item.keywords:
                item.add_marker(skip_inductor)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path_factory, monkeypatch) -> None:
    """What the code caches under the user's cache folder by default (the asked documents' saves, the
    memorag-lite mode's gist checkpoints) goes to a temporary folder in tests; a test may set its own."""
    monkeypatch.delenv(DEPRECATED_CACHE_VARIABLE, raising=False)
    monkeypatch.setenv(CACHE_VARIABLE, str(isolated_cache(tmp_path_factory.mktemp("memorag-cache"))))
