"""The benchmarks' shared device options, clock and peak memory (memorag/benchmarking/)."""

from __future__ import annotations

import argparse

import pytest
import torch

from memorag.benchmarking.clock import TokenClock
from memorag.benchmarking.device import BenchDevice, add_device_options, short_dtype
from memorag.benchmarking.roofline import Shape, decode_bound_s, gemm_side, measure_peaks
from memorag.benchmarking.shapes import SHAPES, random_base
from memorag.runtime.memtrim import resident_mb
from memorag.runtime.placement import PlacementError
from tests.fake_gpu import no_gpu  # noqa: F401 - a fixture, used by name


def parse(argv: list[str], several: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_device_options(parser, ["bf16", "fp32"] if several else "bf16", several_dtypes=several)
    return parser.parse_args(argv)


def test_dtype_names_are_normalized_and_auto_is_refused():
    assert parse([]).dtype == "bfloat16" and parse(["--dtype", "fp16"]).dtype == "float16"
    assert parse([], several=True).dtype == ["bfloat16", "float32"]
    assert parse(["--dtype", "float32", "bf16"], several=True).dtype == ["float32", "bfloat16"]
    assert short_dtype("bfloat16") == "bf16"
    for bad in ("auto", "int8"):
        with pytest.raises(SystemExit):
            parse(["--dtype", bad])


@pytest.mark.usefixtures("no_gpu")
def test_a_cuda_device_without_a_gpu_is_refused():
    with pytest.raises(PlacementError, match="no CUDA GPU"):
        BenchDevice.from_args(parse(["--device", "cuda"]))
    assert BenchDevice.from_args(parse(["--device", "cpu"])).name == "cpu"


def test_cpu_clock_and_peak_memory():
    device = BenchDevice("cpu")
    seconds, value = device.seconds(lambda: 7)
    assert value == 7 and seconds >= 0
    device.reset_peak_memory()
    before = device.peak_memory_mb()
    if before > resident_mb() + 32:
        pytest.skip(f"measured: the peak did not reset to the resident set ({before:.0f} MiB against "
                    f"{resident_mb():.0f}); this kernel does not let the process reset VmHWM")
    resident = resident_mb()  # at most `before`: memory freed since the reset lowers it, not the peak
    block = torch.ones(64 * 2**20, dtype=torch.uint8)  # 64 MiB touched
    assert device.peak_memory_mb() >= resident + 60
    del block


def test_token_clock_leaves_out_prefill_and_warmup():
    clock = TokenClock(BenchDevice("cpu"))
    clock.stamps = [0.0, 1.0, 1.5, 1.6, 1.7, 1.8]  # prompt, prefill + first token, then 4 steps
    summary = clock.summary(warmup_steps=1, sequences=2)
    assert summary["prefill_s"] == 1.0 and summary["decode_steps"] == 3
    assert summary["ms_per_step"] == pytest.approx(100.0) and summary["tokens_per_s"] == pytest.approx(20.0)
    with pytest.raises(ValueError, match="steps recorded"):
        clock.summary(warmup_steps=4)


@pytest.mark.parametrize("name", list(SHAPES))
def test_named_shapes_build_their_configs(name):
    from memorag.benchmarking.shapes import shape_config

    config = shape_config(name)
    assert config.max_position_embeddings == 65536 and config.eos_token_id == 1
    if name == "qwen2-7b":
        assert (config.hidden_size, config.num_hidden_layers, config.num_key_value_heads) == (3584, 28, 4)


def test_random_base_is_built_in_the_asked_dtype():
    base = random_base("tiny", "cpu", "bfloat16")
    assert next(base.parameters()).dtype == torch.bfloat16 and not base.training


def test_peaks_and_decode_bound_on_the_cpu():
    peaks = measure_peaks("float32", Shape(64, 4, 2, 16, 128, 2), window=32, memory=64, gemm_size=64, copy_mb=4)
    assert set(peaks) == {"gemm", "attention", "copy_bytes_per_s"} and min(peaks.values()) > 0
    assert decode_bound_s(3e6, 1e6, {"copy_bytes_per_s": 2e9}) == pytest.approx(2e-3)


def test_the_gemm_peak_shrinks_its_product_to_fit_its_time():
    # 1 GFLOP/s (bf16 on an AVX2-only CPU): a 4096-side product would take 137 s; 1024 takes 2.1 s, 512 0.27 s
    assert gemm_side(4096, 1e9) == 512
    assert gemm_side(4096, 1e9, budget_s=2.2) == 1024
    assert gemm_side(4096, 1e12) == 4096  # 0.14 s at 1 TFLOP/s: kept
    assert gemm_side(256, 1.0) == 256  # never below the probe's side, nor above what was asked


@pytest.mark.cuda
def test_peaks_and_clock_on_cuda():
    peaks = measure_peaks("bfloat16", Shape(), window=256, memory=1024, device="cuda", gemm_size=1024, copy_mb=64)
    assert min(peaks.values()) > 0
    device = BenchDevice("cuda")
    device.reset_peak_memory()
    block = torch.ones(2**20, device="cuda")
    assert device.peak_memory_mb() >= 4 and device.record()["gpu"]
    del block
