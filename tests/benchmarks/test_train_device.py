"""benchmarks/train.py with the device options, on a tiny random shape: steps timed, MFU from the
3x-forward count and the GEMM peak of the same run, peak memory, the JSON complete."""

from __future__ import annotations

import json

import pytest

from benchmarks.train import main

TINY = ["--shape", "tiny", "--windows", "32", "--batches", "2", "--tokens", "128", "--steps", "2",
        "--memory-rank", "0", "--peak-size", "128", "--copy-mb", "8"]


def run_train(tmp_path, device: str, dtype: str, *options: str) -> dict:
    out = tmp_path / "train.json"
    assert main(TINY + ["--device", device, "--dtype", dtype, "--json", str(out), *options]) == 0
    return json.loads(out.read_text())


def check_result(result: dict, device: str, dtype: str) -> None:
    assert result["device"]["device"] == device and result["shape"] == "tiny"
    assert [(row["stage"], row["precision"], row["batch"]) for row in result["rows"]] == [
        ("pretrain", dtype, 2), ("sft", dtype, 2)]
    gemm = result["peaks"][dtype]["gemm"]
    for row in result["rows"]:
        assert len(row["all_seconds"]) == 2 and len(row["warmup_seconds"]) == 1 and row["peak_memory_mb"] > 0
        assert row["tokens_per_s"] == pytest.approx(2 * 128 / row["seconds"])
        flops = row["flops"]
        forward = flops["forward_linear"] + flops["logits"] + flops["forward_attention"]
        assert row["model_flops"] == pytest.approx(3 * forward)
        assert row["mfu"] == pytest.approx(3 * forward / row["seconds"] / gemm)
    pretrain, sft = result["rows"]
    assert pretrain["flops"]["logits"] > sft["flops"]["logits"]  # SFT scores its target rows only


def test_train_benchmark_on_the_cpu(tmp_path):
    check_result(run_train(tmp_path, "cpu", "fp32"), "cpu", "fp32")


@pytest.mark.cuda
def test_train_benchmark_on_cuda(tmp_path):
    result = run_train(tmp_path, "cuda", "bf16")
    check_result(result, "cuda", "bf16")
    assert result["device"]["peak_memory"] == "torch.cuda.max_memory_allocated"


@pytest.mark.inductor
def test_train_benchmark_through_compiled_windows(tmp_path):
    result = run_train(tmp_path, "cpu", "fp32", "--compile-windows")
    check_result(result, "cpu", "fp32")
    assert result["settings"]["compile_windows"] == "default"


@pytest.mark.cuda
def test_train_benchmark_through_compiled_windows_on_cuda(tmp_path):
    result = run_train(tmp_path, "cuda", "bf16", "--compile-windows")
    check_result(result, "cuda", "bf16")
