"""benchmarks/memorize.py with the device options, on a tiny random shape: a cell in its own process,
its bound from the peaks measured in the same run, the JSON complete."""

from __future__ import annotations

import json

import pytest

from benchmarks.memorize import main

TINY = ["--shape", "tiny", "--window", "64", "--lengths", "256", "--ratios", "4", "--plain-max", "0",
        "--peak-size", "128", "--copy-mb", "8"]


def run_memorize(tmp_path, device: str, dtype: str, *options: str) -> dict:
    out = tmp_path / "memorize.json"
    main(TINY + ["--device", device, "--dtype", dtype, "--out", str(out), *options])
    return json.loads(out.read_text())


def check_result(result: dict, device: str, dtype: str, compiled: str | None = None) -> None:
    assert result["machine"]["device"] == device
    assert result["settings"] == {"window": 64, "shape": "tiny", "compile_windows": compiled}
    assert set(result["peaks_flop_per_s"]) == {dtype} and result["peaks_flop_per_s"][dtype]["gemm"] > 0
    (row,) = result["results"]
    assert (row["mode"], row["tokens"], row["ratio"], row["dtype"]) == ("memorize", 256, 4, dtype)
    assert row["memory_entries"] == 64 and row["peak_memory_mb"] > 0
    assert row["tokens_per_s"] == pytest.approx(256 / row["seconds"])
    assert row["share_of_bound"] == pytest.approx(row["bound_s"] / row["seconds"]) and row["bound_s"] > 0


@pytest.mark.slow
def test_memorize_benchmark_on_the_cpu(tmp_path):
    check_result(run_memorize(tmp_path, "cpu", "fp32"), "cpu", "float32")


@pytest.mark.cuda
def test_memorize_benchmark_on_cuda(tmp_path):
    result = run_memorize(tmp_path, "cuda", "bf16")
    check_result(result, "cuda", "bfloat16")
    assert result["machine"]["peak_memory"] == "torch.cuda.max_memory_allocated"


@pytest.mark.inductor
def test_memorize_benchmark_through_compiled_windows(tmp_path):
    result = run_memorize(tmp_path, "cpu", "fp32", "--compile-windows")
    check_result(result, "cpu", "float32", compiled="default")
    assert result["results"][0]["compile_s"] > 0


@pytest.mark.cuda
def test_memorize_benchmark_through_compiled_windows_on_cuda(tmp_path):
    result = run_memorize(tmp_path, "cuda", "bf16", "--compile-windows")
    check_result(result, "cuda", "bfloat16", compiled="default")
