"""benchmarks/decode.py end to end on a tiny random shape: every decoding measured, the JSON complete."""

from __future__ import annotations

import json

import pytest

from benchmarks.decode import main

TINY = ["--shape", "tiny", "--memory-tokens", "256", "--window", "64", "--ratio", "4", "--prompt-tokens", "8",
        "--new-tokens", "5", "--warmup-steps", "1", "--peak-size", "128", "--copy-mb", "8", "--shared-prompts", "4"]
VARIANTS = ["memory model", "transformers static cache", "transformers dynamic cache",
            "memory model, 3 prompts as one batch", "memory model, 4 prompts as one shared round"]


def run_decode(tmp_path, device: str, dtype: str) -> dict:
    out = tmp_path / "decode.json"
    assert main(TINY + ["--device", device, "--dtype", dtype, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def check_result(result: dict, device: str) -> None:
    assert result["memory_entries"] == 256 // 4
    assert result["baseline_prompt_tokens"] == 64 + 8
    assert result["device"]["device"] == device
    assert all(result["peaks"][key] > 0 for key in ("gemm", "attention", "copy_bytes_per_s"))
    assert [row["variant"] for row in result["rows"]] == VARIANTS
    for row in result["rows"]:
        assert row["decode_steps"] == 5 and len(row["step_ms"]) == 5
        assert row["ms_per_step"] > 0 and row["peak_memory_mb"] > 0
        assert row["tokens_per_s"] == pytest.approx(row["sequences"] * 1e3 / row["ms_per_step"])
        assert row["share_of_bound"] == pytest.approx(row["bound_ms_per_step"] / row["ms_per_step"])
    assert [row["sequences"] for row in result["rows"][-2:]] == [3, 4]
    assert result["settings"]["shared_prompts"] == 4
    static = result["rows"][1]["ms_per_step"]
    assert result["memory_over_static"] == pytest.approx(result["rows"][0]["ms_per_step"] / static)


def test_decode_benchmark_on_the_cpu(tmp_path):
    result = run_decode(tmp_path, "cpu", "fp32")
    check_result(result, "cpu")
    assert result["dtype"] == "fp32" and result["device"]["peak_memory"].startswith("peak resident set")
    assert result["machine"]["cpu"]


@pytest.mark.cuda
def test_decode_benchmark_on_cuda(tmp_path):
    result = run_decode(tmp_path, "cuda", "bf16")
    check_result(result, "cuda")
    assert result["device"]["gpu"] and result["device"]["peak_memory"] == "torch.cuda.max_memory_allocated"


def test_variants_pick_the_rows_after_the_memory_models_own(tmp_path):
    out = tmp_path / "decode.json"
    assert main(TINY + ["--device", "cpu", "--dtype", "fp32", "--variants", "batch", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [row["variant"] for row in result["rows"]] == [VARIANTS[0], VARIANTS[3]]
    assert result["variants"] == ["batch"]
    assert result["memory_over_static"] is None and result["memory_over_dynamic"] is None
