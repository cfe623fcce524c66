"""Publishing memory weights: the card is filled from the folder, and one commit uploads card and weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import yaml

from memorag.config import load_config, save_config
from memorag.generation.models import verify_memory_weights
from memorag.memory.checkpoint import CONFIG, WEIGHTS, MemoryWeightsError
from memorag.training.build import build_model
from memorag.training.config import TrainConfig
from memorag.training.publish import model_card, publish_memory_weights
from memorag.training.run_checkpoints import TRAIN_CONFIG
from tests.training.helpers import ROOT

REPORT = {"step": 40, "num_sequences": 3, "seq_length": 4096, "window": 256, "score_windows": 4,
          "conditions": {"no memory": {"perplexity": 22.05, "mean_nll": 3.09, "tokens": 3060},
                         "memory r=4": {"perplexity": 21.25, "mean_nll": 3.06, "tokens": 3060},
                         "full context": {"perplexity": None, "mean_nll": None, "tokens": 0, "note": "too long"}}}


@pytest.fixture
def sft_weights(tmp_path):
    """A folder as a debug SFT run leaves it: memory weights and the training config."""
    cfg = load_config(TrainConfig, ROOT / "configs" / "debug-sft.yaml", [])
    model = build_model(cfg.model, cfg.memory)
    with torch.no_grad():
        model.memory_embedding.add_(0.5)
    folder = model.save_memory_weights(tmp_path / "final")
    save_config(cfg, folder / TRAIN_CONFIG)
    return folder


class FakeHfApi:
    """Records the calls `publish_memory_weights` makes instead of reaching a hub."""

    def __init__(self):
        self.calls = []

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def create_commit(self, repo_id, operations, **kwargs):
        self.calls.append(("create_commit", repo_id, {"operations": operations, **kwargs}))
        return type("CommitInfo", (), {"commit_url": f"https://hub.invalid/{repo_id}/commit/1"})()


def test_the_card_is_filled_from_the_folder(sft_weights):
    card = model_card(sft_weights, "team/debug-memory", eval_report=REPORT, license_id="apache-2.0")
    front, body = card.split("---\n")[1], card.split("---\n", 2)[2]
    assert yaml.safe_load(front) == {"tags": ["memorag", "memory-model", "long-context"], "license": "apache-2.0"}
    manifest = json.loads((sft_weights / CONFIG).read_text())
    assert f"sha256 `{manifest['weights_sha256']}`" in body
    assert 'MemoryModel.from_pretrained("random:llama", memory_weights="team/debug-memory")' in body
    assert "| 64 | 8 | fixed | full-coverage | qkv | the eos token |" in body  # the ratio it memorizes at
    assert "trained with ratios 2, 4, 8 (step-random mix)" in body
    assert "| stage | stage 2 (clue fine-tuning: next-token loss, on the written clues only) |" in body
    assert "| data files | `sft_debug.jsonl` |" in body
    assert "| sequence length | at most 2048 tokens |" in body and "lr 0.003" in body
    assert "| memory r=4 | 3060 | 21.250 |" in body and "| full context | 0 | n/a (too long) |" in body
    assert "{" not in body.replace("{\n", "")  # no placeholder left unfilled
    assert str(ROOT) not in card  # no local paths of the machine that trained


def test_the_card_names_the_rlgf_stage(sft_weights):
    config = yaml.safe_load((sft_weights / TRAIN_CONFIG).read_text())
    (sft_weights / TRAIN_CONFIG).write_text(yaml.safe_dump({**config, "stage": "rlgf"}))
    body = model_card(sft_weights, "team/debug-memory").split("---\n", 2)[2]
    assert "| stage | stage 3 (RLGF: DPO on pairs of the memory's own clue sets" in body
    assert "| sequence length | at most 2048 tokens |" in body and "unknown" not in body


def test_the_card_gives_both_shares_where_the_report_has_them(sft_weights):
    gap = lambda share: {"share": share, "low": share - 0.05, "high": share + 0.05}
    report = REPORT | {"net_share": {"r=8": gap(0.419)}, "content_share": {"r=8": gap(0.354)}}
    body = model_card(sft_weights, "team/debug-memory", eval_report=report)
    assert "| r=8 | 41.9% | 36.9% .. 46.9% | 35.4% | 30.4% .. 40.4% |" in body and "net share" in body
    only_content = model_card(sft_weights, "team/debug-memory", eval_report=REPORT | {"content_share": {"r=8": gap(0.1)}})
    assert "| r=8 | 10.0% | 5.0% .. 15.0% |" in only_content and "net share" not in only_content


def test_a_folder_without_a_training_record_says_so(sft_weights):
    (sft_weights / TRAIN_CONFIG).unlink()
    card = model_card(sft_weights, "team/untrained")
    assert "No training record was saved" in card and "No evaluation was published" in card


def test_a_hub_base_model_is_named_in_the_metadata(sft_weights):
    manifest = json.loads((sft_weights / CONFIG).read_text())
    manifest["base"]["base_model"] = "Qwen/Qwen2-7B-Instruct"
    (sft_weights / CONFIG).write_text(json.dumps(manifest))
    card = model_card(sft_weights, "team/qwen-memory")
    assert yaml.safe_load(card.split("---\n")[1])["base_model"] == "Qwen/Qwen2-7B-Instruct"


def test_publish_uploads_weights_and_card_in_one_commit(sft_weights):
    api = FakeHfApi()
    url = publish_memory_weights(sft_weights, "team/debug-memory", api=api, private=True, eval_report=REPORT)
    assert url == "https://hub.invalid/team/debug-memory/commit/1"
    (first, repo, settings), (second, commit_repo, commit) = api.calls
    assert (first, repo, settings) == ("create_repo", "team/debug-memory",
                                       {"repo_type": "model", "private": True, "exist_ok": True})
    assert (second, commit_repo, commit["repo_type"]) == ("create_commit", "team/debug-memory", "model")
    files = {op.path_in_repo: op.path_or_fileobj for op in commit["operations"]}
    assert set(files) == {CONFIG, WEIGHTS, "README.md"}
    assert files[WEIGHTS] == str(sft_weights / WEIGHTS) and files[CONFIG] == str(sft_weights / CONFIG)
    assert files["README.md"] == model_card(sft_weights, "team/debug-memory", eval_report=REPORT).encode()


def test_corrupt_weights_are_refused_before_anything_is_uploaded(sft_weights):
    (sft_weights / WEIGHTS).write_bytes((sft_weights / WEIGHTS).read_bytes()[:-4])
    api = FakeHfApi()
    with pytest.raises(MemoryWeightsError, match="truncated or corrupt"):
        publish_memory_weights(sft_weights, "team/debug-memory", api=api)
    assert api.calls == []


def _checkout_env() -> dict[str, str]:
    """The script imports this checkout's package (another checkout may be the installed one)."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
def test_the_script_writes_the_card_only(sft_weights, tmp_path):
    out = tmp_path / "card.md"
    done = subprocess.run([sys.executable, "train/publish.py", "--weights", str(sft_weights), "--repo", "team/x",
                           "--card-only", str(out)], cwd=ROOT, env=_checkout_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.read_text() == model_card(sft_weights, "team/x")
    helped = subprocess.run([sys.executable, "train/publish.py", "--help"], cwd=ROOT, env=_checkout_env(),
                            capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "--card-only" in helped.stdout


@pytest.mark.slow
def test_a_local_folder_holds_weights_card_runs_and_evaluations(sft_weights, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_log.jsonl").write_text('{"event": "train", "step": 5}\n')
    (run / TRAIN_CONFIG).write_text((sft_weights / TRAIN_CONFIG).read_text())
    report = tmp_path / "step-40.json"
    report.write_text(json.dumps({**REPORT, "context_gain": {"r=4": {"share": 0.12, "low": 0.05, "high": 0.2}}}))
    target = tmp_path / "shipped" / "memory-debug"
    done = subprocess.run([sys.executable, "train/publish.py", "--weights", str(sft_weights), "--to-folder",
                           str(target), "--run", str(run), "--eval", str(report)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    names = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert names == sorted(["README.md", CONFIG, WEIGHTS, "eval/step-40.json", "training_runs/run/train_config.yaml",
                            "training_runs/run/train_log.jsonl", TRAIN_CONFIG])
    assert (target / WEIGHTS).read_bytes() == (sft_weights / WEIGHTS).read_bytes()
    assert "| r=4 | 12.0% | 5.0% .. 20.0% |" in (target / "README.md").read_text()
    halved = subprocess.run([sys.executable, "train/publish.py", "--weights", str(sft_weights), "--to-folder",
                             str(tmp_path / "bf16"), "--dtype", "bfloat16"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert halved.returncode == 0, halved.stderr[-2000:]
    verify_memory_weights(tmp_path / "bf16")  # the manifest's hash follows the rewritten weights
    assert json.loads((tmp_path / "bf16" / CONFIG).read_text())["weights_dtype"] == "bfloat16"
    assert (tmp_path / "bf16" / WEIGHTS).stat().st_size < (sft_weights / WEIGHTS).stat().st_size
    (tmp_path / "norun").mkdir()
    refused = subprocess.run([sys.executable, "train/publish.py", "--weights", str(sft_weights), "--to-folder",
                              str(tmp_path / "other"), "--run", str(tmp_path / "norun")], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "holds no train_log.jsonl" in refused.stderr
    assert not (tmp_path / "other").exists()


def test_a_base_read_from_a_copy_is_recorded_by_its_name_after_its_shape_is_checked(sft_weights, tmp_path):
    from memorag.training.publish import ship_memory_weights

    cfg = load_config(TrainConfig, ROOT / "configs" / "debug-sft.yaml", [])
    same = tmp_path / "same-base"
    build_model(cfg.model, cfg.memory).base_model.config.save_pretrained(same)
    shipped = ship_memory_weights(sft_weights, tmp_path / "shipped", base=str(same))
    manifest = json.loads((shipped / CONFIG).read_text())
    assert manifest["base"]["base_model"] == str(same) and f"memory weights for {same}" in (shipped / "README.md").read_text()
    verify_memory_weights(shipped)
    assert (shipped / WEIGHTS).read_bytes() == (sft_weights / WEIGHTS).read_bytes()
    other = tmp_path / "other-base"
    config = build_model(cfg.model, cfg.memory).base_model.config
    config.hidden_size *= 2
    config.save_pretrained(other)
    with pytest.raises(ValueError, match="hidden_size"):
        ship_memory_weights(sft_weights, tmp_path / "refused", base=str(other))
    assert not (tmp_path / "refused").exists()
