"""Fixtures that make torch see, or not see, a CUDA GPU. `fake_gpu` is a FAKE: it only lets the
CUDA and bitsandbytes loading arguments be built and checked on a machine without a GPU; nothing
is ever placed on it."""

from __future__ import annotations

import importlib.util

import pytest
import torch


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def fake_gpu(monkeypatch):
    """Pretend torch sees one bf16-capable CUDA GPU and that bitsandbytes and accelerate are installed."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        if name in ("bitsandbytes", "accelerate"):
            return object()
        return real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
