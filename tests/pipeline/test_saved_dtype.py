"""A save memorized in bf16 loads under dtype "auto" on a CPU where "auto" would pick float32
(memorag/runtime/cpu_dtype.py): the memory model runs in the memory's dtype."""

from __future__ import annotations

import pytest
import torch

from memorag.pipeline import MemoRAG
from memorag.pipeline.persistence import ManifestMismatchError
from memorag.runtime import cpu_dtype
from tests.memory.test_cpu_dtype import half_base_folder  # noqa: F401 - fixture

from .conftest import TEST_SETTINGS, FakeEchoGenerator, FakeHashEmbedder, topic

MEMORY = {"window": 16, "ratios": [4]}


def rag_over(base: str, **settings) -> MemoRAG:
    return MemoRAG(memory_model=base, memory=MEMORY, embedder=FakeHashEmbedder(), embedder_name="fake-hash",
                   generator=FakeEchoGenerator(), **{**TEST_SETTINGS, **settings})


def test_a_bf16_save_loads_in_bf16_where_auto_picks_float32(half_base_folder, tmp_path, monkeypatch):  # noqa: F811
    bf16_base = half_base_folder
    monkeypatch.setattr(cpu_dtype, "native_on_cpu", lambda dtype: True)  # the machine it was memorized on
    rag = rag_over(bf16_base)
    rag.memorize(topic(0))
    assert rag.memory_model.base_dtype == torch.bfloat16
    rag.save(tmp_path / "save")

    monkeypatch.setattr(cpu_dtype, "native_on_cpu", lambda dtype: dtype == torch.float32)  # an AVX2-only CPU
    assert rag_over(bf16_base).memory_model.base_dtype == torch.float32  # a fresh pipeline: float32 here
    keywords = {"embedder": FakeHashEmbedder(), "embedder_name": "fake-hash", "generator": FakeEchoGenerator()}
    loaded = MemoRAG.load(tmp_path / "save", **keywords)
    assert loaded.memory_model.base_dtype == torch.bfloat16
    assert loaded.ask(topic(0, 5)).answer == "the fake answer"
    with pytest.raises(ManifestMismatchError, match="memorized in bfloat16 .* --dtype bfloat16"):
        MemoRAG.load(tmp_path / "save", dtype="float32", **keywords).ask(topic(0, 5))
