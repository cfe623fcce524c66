"""eval/generate_clues.py's device, precision and thread options reach the checkpoint's model."""

from __future__ import annotations

import pytest
import torch

from memorag.evaluation.clue_recall import load_checkpoint_model
from memorag.runtime.placement import Placement
from tests.evaluation.test_clue_recall import checkpoint  # noqa: F401 - fixture
from tests.evaluation.test_scripts import _script


def test_the_checkpoint_loads_in_the_dtype_asked_for(checkpoint):  # noqa: F811 - the imported fixture
    weights, _ = checkpoint
    assert load_checkpoint_model(weights).base_dtype == torch.float32  # "auto": the checkpoint's own
    model = load_checkpoint_model(weights, placement=Placement.resolve("cpu", "bfloat16"))
    assert model.base_dtype == torch.bfloat16 and model.device.type == "cpu"


def test_the_options_become_pipeline_settings(monkeypatch, tmp_path):
    script = _script("generate_clues")
    seen = {}

    def fake_run_clue_recall(weights, data, out, *, pipeline, **kwargs):  # a FAKE: records its settings
        seen["pipeline"] = pipeline
        return {"n": 0}

    monkeypatch.setattr(script, "run_clue_recall", fake_run_clue_recall)
    assert script.main(["--checkpoint", "ck", "--data", "d.jsonl", "--out", str(tmp_path / "o.jsonl"),
                        "--device", "cpu", "--dtype", "bf16", "--threads", "1", "retriever=bm25"]) == 0
    pipeline = seen["pipeline"]
    assert (pipeline.device, pipeline.dtype, pipeline.threads, pipeline.retriever) == ("cpu", "bfloat16", 1, "bm25")


def test_4bit_without_a_gpu_is_a_clear_usage_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(SystemExit) as exit_info:
        _script("generate_clues").main(["--checkpoint", "ck", "--data", "d.jsonl", "--load-in-4bit"])
    assert exit_info.value.code == 2
    assert "--load-in-4bit needs a CUDA GPU and bitsandbytes: pip install" in capsys.readouterr().err


def test_the_eval_configs_name_their_device_and_the_slurm_script_passes_it():
    from memorag.evaluation import load_eval_config
    from tests.evaluation.test_scripts import ROOT

    paper = load_eval_config(ROOT / "configs/eval/paper-7b.yaml", ["pipeline.device=cuda", "pipeline.threads=8"])
    assert (paper.pipeline.device, paper.pipeline.dtype, paper.pipeline.threads) == ("cuda", "bfloat16", 8)
    for name in ("smoke", "cpu-hour"):
        assert load_eval_config(ROOT / f"configs/eval/{name}.yaml").pipeline.device == "cpu"
    sbatch = (ROOT / "slurm/eval.sbatch").read_text()
    assert 'pipeline.device="$DEVICE" pipeline.threads="$THREADS"' in sbatch


def test_run_refuses_a_gpu_config_on_a_cpu_machine_before_any_work(capsys, tmp_path):
    from tests.evaluation.test_scripts import ROOT

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    code = _script("run").main(["--config", str(ROOT / "configs/eval/paper-7b.yaml"), f"out_dir={tmp_path / 'o'}"])
    assert code == 2 and "device='cuda' but torch sees no CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
