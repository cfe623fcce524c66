"""The time-boxed GPU recipe on the CPU with tiny shapes: parts, the exact base form, and the same commands end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import torch

from memorag.training import run_checkpoints as ckpt
from memorag.training.base_pack import (
    MANIFEST,
    QUANT_FILE,
    dequantize,
    restore_base,
    state_sha256,
    unpermute_rows,
)
from memorag.training.parts import BundleError, bundle, unbundle


def test_parts_round_trip_and_name_a_damaged_or_missing_part(tmp_path):
    (tmp_path / "a.txt").write_bytes(numpy.random.default_rng(0).bytes(5000))
    (tmp_path / "b.txt").write_text("b" * 100)
    written = bundle({"x/a.txt": tmp_path / "a.txt", "b.txt": tmp_path / "b.txt"}, tmp_path / "out", "d", 2048,
                     compress=False)
    assert len(written) >= 4 and all(p.stat().st_size <= 2048 for p in written[:-1])
    extracted = unbundle("d", [tmp_path / "out"], tmp_path / "back")
    assert (tmp_path / "back/x/a.txt").read_bytes() == (tmp_path / "a.txt").read_bytes() and len(extracted) == 2
    part = tmp_path / "out/d.part01"
    part.write_bytes(b"0" + part.read_bytes()[1:])
    with pytest.raises(BundleError, match="d.part01 differs"):
        unbundle("d", [tmp_path / "out"], tmp_path / "again")
    part.unlink()
    with pytest.raises(BundleError, match="d.part01 is missing"):
        unbundle("d", [tmp_path / "out"], tmp_path / "again")


def test_a_bundle_over_the_file_limit_is_refused_before_writing(tmp_path):
    (tmp_path / "a").write_bytes(numpy.random.default_rng(1).bytes(9000))
    with pytest.raises(BundleError, match="more than the 3 files"):
        bundle({"a": tmp_path / "a"}, tmp_path / "out", "r", 2048, compress=False, max_files=3)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["Q4_1", "Q8_0"])
def test_dequantize_equals_the_gguf_reader(kind):
    gguf = pytest.importorskip("gguf")
    values = numpy.random.default_rng(2).standard_normal((6, 64)).astype(numpy.float32)
    quant_type = getattr(gguf.GGMLQuantizationType, kind)
    blocks = gguf.quants.quantize(values, quant_type)  # uint8 [6, row bytes]
    reference = gguf.quants.dequantize(blocks, quant_type)
    ours = dequantize(kind, torch.from_numpy(blocks), (6, 64))
    assert torch.equal(ours, torch.from_numpy(reference.astype(numpy.float32)))


def test_unpermute_rows_is_the_hf_order_of_gguf_query_rows():
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    rows = numpy.arange(24 * 3, dtype=numpy.float32).reshape(24, 3)
    expected = LlamaTensorProcessor()._reverse_permute_weights(rows, 4, 2)
    assert numpy.array_equal(unpermute_rows(torch.from_numpy(rows), 2).numpy(), expected)


def _tiny_pack(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import save_file

    scale = torch.tensor([0.5, 0.25], dtype=torch.float16).view(torch.uint8).reshape(2, 2)
    codes = torch.arange(64, dtype=torch.int8).reshape(2, 32).view(torch.uint8)
    stored = {"w": torch.cat([scale, codes], 1), "n": torch.ones(4)}
    folder.mkdir()
    save_file(stored, folder / QUANT_FILE)
    state = {"w": dequantize("Q8_0", stored["w"], (2, 32)).bfloat16(), "n": torch.ones(4).bfloat16()}
    (folder / "config.json").write_text("{}")
    manifest = {"tensors": {"w": {"kind": "Q8_0", "shape": [2, 32]}, "n": {"kind": "F32", "shape": [4]}},
                "files": ["config.json"], "state_sha256": state_sha256(state)}
    (folder / MANIFEST).write_text(json.dumps(manifest))
    return state


def test_restore_base_rebuilds_the_state_and_refuses_another_hash(tmp_path):
    from safetensors.torch import load_file

    state = _tiny_pack(tmp_path / "pack")
    restored = load_file(restore_base(tmp_path / "pack", tmp_path / "base") / "model.safetensors")
    assert state_sha256(restored) == state_sha256(state) and torch.equal(restored["w"][1], torch.arange(32, 64) * 0.25)
    manifest = json.loads((tmp_path / "pack" / MANIFEST).read_text())
    manifest["state_sha256"] = "0" * 64
    (tmp_path / "pack" / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="differs from the pack"):
        restore_base(tmp_path / "pack", tmp_path / "base2")


def _timeboxed(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train/timeboxed.py", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # about a minute idle, longer on a shared machine
def test_the_timeboxed_commands_run_end_to_end_on_the_cpu(tmp_path):
    folder = str(tmp_path / "timeboxed")
    carried = tmp_path / "carried"
    done = _timeboxed("pack-data", "--out", str(carried), "--part-mib", "0.05", "examples/sft_debug.jsonl")
    assert done.returncode == 0, done.stderr
    assert _timeboxed("receive", "--folder", folder, "--from", str(carried)).returncode == 0
    assembled = _timeboxed("assemble", "--folder", folder)
    assert json.loads(assembled.stdout)["data"] == "."
    started = _timeboxed("start", "--folder", folder, "--device", "cpu", "--pretrain-config", "configs/debug.yaml",
                     "--sft-config", "configs/debug-sft.yaml", "--pretrain-seconds", "2", "--sft-seconds", "1",
                     "--checkpoint-seconds", "1", "--pretrain-set", "optim.warmup_steps=1",
                     "--sft-set", "optim.lr=0.0007", "--sft-set", "loss.kind=mix", "--control-stage1",
                     "eval.num_sequences=2")
    assert started.returncode == 0, started.stderr
    waited = _timeboxed("wait", "--folder", folder, "--seconds", "150", "--every", "2")
    status = json.loads((tmp_path / "timeboxed/status.json").read_text())
    assert waited.returncode == 0 and status["phase"] == "finished", (waited.stdout, status)
    control = json.loads((tmp_path / "timeboxed/eval/control.json").read_text())
    assert {"r=2", "r=4", "r=8"} <= set(control["net_share"]) and "content_share" in control
    # the per-stage settings reached their stage only; stage 1's control ran beside SFT, on stage 1's checkpoint
    import yaml

    stage1_config = yaml.safe_load((tmp_path / "timeboxed/pretrain/train_config.yaml").read_text())
    sft_config = yaml.safe_load((tmp_path / "timeboxed/sft/train_config.yaml").read_text())
    assert stage1_config["optim"]["warmup_steps"] == 1 and stage1_config["optim"]["lr"] == 3.0e-3
    assert sft_config["optim"]["lr"] == 0.0007 and sft_config["loss"]["kind"] == "mix"
    assert sft_config["optim"]["warmup_steps"] == 2 and stage1_config["loss"]["kind"] != "mix"
    stage1_control = json.loads((tmp_path / "timeboxed/eval/control-pretrain.json").read_text())
    assert stage1_control["memory_weights"] == status["pretrain_checkpoint"], stage1_control.keys()
    out = tmp_path / "OUT"
    exported = _timeboxed("export", "--folder", folder, "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert len(list(out.iterdir())) <= 8 and all(p.stat().st_size < 16 << 20 for p in out.iterdir())
    back = tmp_path / "back"
    assert _timeboxed("unpack", "--from", str(out), "--to", str(back)).returncode == 0
    assert ckpt.read_latest(back / "pretrain") is not None and ckpt.read_latest(back / "sft") is not None
    assert (back / "eval/control.json").read_bytes() == (tmp_path / "timeboxed/eval/control.json").read_bytes()
    # the next time-boxed run carries the export back in: its checkpoints are where a rerun resumes them
    assert _timeboxed("receive", "--folder", str(tmp_path / "next"), "--from", str(out)).returncode == 0
    assert "results" in json.loads(_timeboxed("assemble", "--folder", str(tmp_path / "next")).stdout)
    assert ckpt.read_latest(tmp_path / "next/pretrain") is not None
