"""dtype "auto" on the CPU: a bf16/fp16 checkpoint computes in float32 where the CPU has no native
instructions for it and the float32 weights fit (memorag/runtime/cpu_dtype.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from torch import nn

from memorag.generation import LocalGenerator
from memorag.memory import MemoryConfig, MemoryModel
from memorag.runtime import cpu_dtype
from memorag.runtime.cpu_dtype import auto_cpu_dtype, native_on_cpu, settle_auto_dtype

from .conftest import tiny_base
from .test_persistence import tiny_tokenizer

GIB = 1 << 30


@pytest.fixture
def no_native_half(monkeypatch):
    monkeypatch.setattr(cpu_dtype, "native_on_cpu", lambda dtype: dtype == torch.float32)


@pytest.fixture
def native_half(monkeypatch):
    monkeypatch.setattr(cpu_dtype, "native_on_cpu", lambda dtype: True)


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    pytest.skip("no flags line in /proc/cpuinfo")


@pytest.mark.skipif(not Path("/proc/cpuinfo").is_file(), reason="reads the CPU's flags from /proc/cpuinfo")
def test_native_on_cpu_agrees_with_the_kernels_cpu_flags():
    flags = cpu_flags()
    assert native_on_cpu(torch.float32)
    assert native_on_cpu(torch.bfloat16) == bool({"amx_tile", "avx512_bf16"} & flags)
    assert native_on_cpu(torch.float16) == ("amx_fp16" in flags)


def test_auto_upcasts_half_only_without_native_instructions_and_when_it_fits(no_native_half):
    assert auto_cpu_dtype(torch.bfloat16, 135_000_000, memory_bytes=24 * GIB) == torch.float32
    assert auto_cpu_dtype(torch.float16, 135_000_000, memory_bytes=24 * GIB) == torch.float32
    # a 7B model's float32 weights (28 GB) would take more than a quarter of 24 GiB: its own dtype stays
    assert auto_cpu_dtype(torch.bfloat16, 7_000_000_000, memory_bytes=24 * GIB) == torch.bfloat16
    assert auto_cpu_dtype(torch.bfloat16, GIB // 16, memory_bytes=GIB) == torch.float32  # exactly a quarter
    assert auto_cpu_dtype(torch.bfloat16, GIB // 16 + 1, memory_bytes=GIB) == torch.bfloat16
    assert auto_cpu_dtype(torch.float32, 135_000_000, memory_bytes=24 * GIB) == torch.float32


def test_auto_keeps_half_where_the_cpu_computes_it(native_half):
    assert auto_cpu_dtype(torch.bfloat16, 135_000_000, memory_bytes=24 * GIB) == torch.bfloat16


def test_settle_casts_only_what_auto_loaded_on_the_cpu(no_native_half, caplog):
    def half_model():
        return nn.Linear(4, 4).to(torch.bfloat16)

    with caplog.at_level(logging.INFO, logger="memorag.runtime.cpu_dtype"):
        assert next(settle_auto_dtype(half_model(), {"dtype": "auto"}).parameters()).dtype == torch.float32
    assert "no native torch.bfloat16" in caplog.text and "dtype=bfloat16" in caplog.text
    assert next(settle_auto_dtype(half_model(), {}).parameters()).dtype == torch.float32  # "auto" is the default
    for asked in ({"dtype": torch.bfloat16}, {"dtype": "auto", "quantization_config": object()}):
        assert next(settle_auto_dtype(half_model(), asked).parameters()).dtype == torch.bfloat16
    assert list(settle_auto_dtype(nn.ReLU(), {"dtype": "auto"}).parameters()) == []


@pytest.fixture
def half_base_folder(tmp_path):
    folder = tmp_path / "base"
    tiny_base("llama").to(torch.bfloat16).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return str(folder)


def test_memory_model_and_generator_load_a_bf16_checkpoint_in_float32_without_native_bf16(
        half_base_folder, no_native_half):
    model = MemoryModel.from_pretrained(half_base_folder, config=MemoryConfig(window=16, ratios=[2]))
    assert model.base_dtype == torch.float32
    assert MemoryModel.from_pretrained(half_base_folder, config=MemoryConfig(window=16, ratios=[2]),
                                       dtype=torch.bfloat16).base_dtype == torch.bfloat16
    generator = LocalGenerator.from_pretrained(half_base_folder, device="cpu")
    assert next(generator.model.parameters()).dtype == torch.float32
    assert next(LocalGenerator.from_pretrained(half_base_folder, device="cpu", dtype="bf16").model.parameters()
                ).dtype == torch.bfloat16


def test_memory_model_keeps_bf16_where_the_cpu_computes_it(half_base_folder, native_half):
    model = MemoryModel.from_pretrained(half_base_folder, config=MemoryConfig(window=16, ratios=[2]))
    assert model.base_dtype == torch.bfloat16
