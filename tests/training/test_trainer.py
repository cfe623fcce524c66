"""The training loop: exact resume, atomic checkpoints, memory-only checkpoints that reload exactly."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from memorag.memory import MemoryModel
from memorag.training import resume
from memorag.training import run_checkpoints as ckpt
from memorag.training.trainer import Trainer
from tests.memory.conftest import random_ids, tiny_base
from tests.memory.test_persistence import tiny_tokenizer, word
from tests.training.helpers import debug_config, quick_config, reset_accelerate, train_losses


def run(cfg) -> dict:
    reset_accelerate()
    return Trainer(cfg).train()


def test_resume_after_a_stop_gives_the_losses_of_an_uninterrupted_run(tmp_path):
    settings = ["optim.max_steps=6", "optim.grad_accumulation=2", "checkpoint.every_steps=100"]
    run(debug_config(tmp_path / "straight", *settings))
    first = run(debug_config(tmp_path / "resumed", *settings, "optim.stop_at_step=3"))
    assert first["step"] == 3 and first["reason"].startswith("stopped")
    assert ckpt.read_latest(tmp_path / "resumed").name == "checkpoint-3"
    second = run(debug_config(tmp_path / "resumed", *settings))
    assert second["step"] == 6 and second["reason"] == "finished"
    straight, resumed = train_losses(tmp_path / "straight"), train_losses(tmp_path / "resumed")
    assert sorted(resumed) == sorted(straight) == [1, 2, 3, 4, 5, 6]  # the log reads as one run
    records = [json.loads(line) for line in (tmp_path / "resumed" / "train_log.jsonl").read_text().splitlines()]
    [event] = [r for r in records if r["event"] == "resume"]  # the one setting that changed, and nothing else
    assert event["changes"] == [{"key": "optim.stop_at_step", "from": 3, "to": None, "kind": "adjustable"}]
    for step in (4, 5, 6):
        assert resumed[step] == pytest.approx(straight[step], rel=1e-6, abs=1e-7), step
    a = load_file(str(tmp_path / "straight" / "checkpoint-6" / "memory_weights.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "checkpoint-6" / "memory_weights.safetensors"))
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-6, atol=1e-7)


def test_only_memory_parameters_are_optimized_and_the_base_stays_frozen(tmp_path):
    reset_accelerate()
    trainer = Trainer(debug_config(tmp_path, "optim.max_steps=2"))
    in_optimizer = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert in_optimizer == {id(p) for p in trainer.unwrapped.memory_parameters().values()}
    base_before = {n: p.detach().clone() for n, p in trainer.unwrapped.base_model.named_parameters()
                   if not p.requires_grad}
    memory_before = {n: p.detach().clone() for n, p in trainer.unwrapped.memory_parameters().items()}
    trainer.train()
    for name, param in trainer.unwrapped.base_model.named_parameters():
        if name in base_before:
            assert torch.equal(param, base_before[name]), name
    changed = [n for n, p in trainer.unwrapped.memory_parameters().items() if not torch.equal(p, memory_before[n])]
    assert changed


def _tiny_base_dir(tmp_path):
    base_dir = tmp_path / "base"
    tiny_base("llama").save_pretrained(base_dir)
    tiny_tokenizer().save_pretrained(base_dir)
    text = "\n".join(" ".join(word(2 + (i * 7 + j * 3) % 90) for j in range(12)) for i in range(80))
    (tmp_path / "words.txt").write_text(text)
    return base_dir


def test_a_checkpoint_holds_the_memory_parameters_and_reloads_the_trained_model(tmp_path):
    base_dir = _tiny_base_dir(tmp_path)
    cfg = debug_config(
        tmp_path / "run", f"model.base={base_dir}", "model.tokenizer=null", "model.architecture={}",
        "memory.window=16", "memory.ratios=[2,4]", "eval.ratios=[2,4]", f"data.files=[{tmp_path / 'words.txt'}]",
        "data.min_length=48", "data.max_length=64", "data.length_multiple=16", "optim.max_steps=3",
        "optim.lr=0.05",
    )
    reset_accelerate()
    trainer = Trainer(cfg)
    trainer.train()
    folder = tmp_path / "run" / "checkpoint-3"
    saved = load_file(str(folder / "memory_weights.safetensors"))
    trained = trainer.unwrapped
    assert set(saved) == set(trained.memory_parameters())  # the memory parameters, nothing of the base
    assert sum(t.numel() for t in saved.values()) == sum(p.numel() for p in trained.memory_parameters().values())
    assert {"train_config.yaml", "trainer_state.json", "data_state.json", "optimizer.pt", "rng_state_0.pt"} <= {
        p.name for p in folder.iterdir()}
    assert MemoryModel.from_pretrained(str(base_dir), memory_weights=folder).config.ratios == [4]  # one stated ratio
    reloaded = MemoryModel.from_pretrained(str(base_dir), memory_weights=folder, config=cfg.memory)
    fresh = MemoryModel.from_pretrained(str(base_dir), memory_weights=None, config=cfg.memory)
    ids = random_ids(70)
    with torch.no_grad():
        expected = trained(ids, return_logits=True).logits
        torch.testing.assert_close(reloaded(ids, return_logits=True).logits, expected, rtol=0, atol=0)
        assert not torch.allclose(fresh(ids, return_logits=True).logits, expected)  # training changed it
    assert (tmp_path / "run" / "final" / "memory_weights.safetensors").is_file()


def test_a_crash_during_a_save_leaves_the_previous_checkpoint_as_latest(tmp_path, monkeypatch):
    cfg = debug_config(tmp_path, "optim.max_steps=4", "checkpoint.every_steps=2")
    real = ckpt.write_trainer_state
    calls = []

    def failing(folder, state, data_state):
        calls.append(state["step"])
        if state["step"] == 4:
            (folder / "half-written").write_text("x")
            raise OSError("disk full (simulated)")
        real(folder, state, data_state)

    monkeypatch.setattr(ckpt, "write_trainer_state", failing)
    reset_accelerate()
    with pytest.raises(OSError, match="simulated"):
        Trainer(cfg).train()
    assert calls == [2, 4]
    assert (tmp_path / ckpt.LATEST).read_text().strip() == "checkpoint-2"
    assert not (tmp_path / "checkpoint-4").exists()
    assert [step for step, _ in ckpt.list_checkpoints(tmp_path)] == [2]
    assert ckpt.find_resume(tmp_path, "auto").name == "checkpoint-2"

    monkeypatch.setattr(ckpt, "write_trainer_state", real)
    summary = run(cfg)
    assert summary["step"] == 4
    assert ckpt.read_latest(tmp_path).name == "checkpoint-4"
    assert not list(tmp_path.glob(".checkpoint-*"))  # the partial folder was cleaned up


def test_keep_last_prunes_old_checkpoints_and_resume_none_refuses_existing_ones(tmp_path):
    cfg = debug_config(tmp_path, "optim.max_steps=5", "checkpoint.every_steps=1", "checkpoint.keep_last=2")
    run(cfg)
    assert [step for step, _ in ckpt.list_checkpoints(tmp_path)] == [4, 5]
    state = json.loads((tmp_path / "checkpoint-5" / "trainer_state.json").read_text())
    assert state["step"] == 5 and state["format"] == "memorag-trainer-state"
    reset_accelerate()
    with pytest.raises(ckpt.CheckpointError, match="already holds checkpoints"):
        Trainer(debug_config(tmp_path, "checkpoint.resume=none"))


def test_a_published_checkpoint_newer_than_the_pointer_wins(tmp_path):
    cfg = debug_config(tmp_path, "optim.max_steps=2", "checkpoint.every_steps=1", "checkpoint.keep_last=3")
    run(cfg)
    (tmp_path / ckpt.LATEST).write_text("checkpoint-1\n")  # as if killed between rename and pointer update
    assert ckpt.find_resume(tmp_path, "auto").name == "checkpoint-2"


def test_the_stop_file_checkpoints_and_stops(tmp_path):
    cfg = debug_config(tmp_path, "optim.max_steps=50", "checkpoint.every_steps=100")
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "STOP").write_text("")
    summary = run(cfg)
    assert summary["step"] == 1 and "stop file" in summary["reason"]
    assert ckpt.read_latest(tmp_path).name == "checkpoint-1"
    assert not (tmp_path / "STOP").exists()  # consumed: the next run of this folder resumes and goes on
    assert not (tmp_path / "final").exists()  # an interrupted run does not publish final weights


def test_sft_trains_on_target_tokens(tmp_path):
    from tests.data.test_sft import write_samples

    data = write_samples(tmp_path / "sft.jsonl", count=6)
    cfg = debug_config(tmp_path / "run", "stage=sft", f"data.files=[{data}]", "data.batch_size=1",
                       "optim.max_steps=3", "memory.ratios=[2,4,8]")
    summary = run(cfg)
    assert summary["step"] == 3
    records = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    train = [r for r in records if r["event"] == "train"]
    assert all(0 < r["loss_tokens"] < 200 for r in train)  # the targets only, not the contexts


def test_epochs_count_the_steps_once_and_cache_the_count(tmp_path):
    cfg = debug_config(tmp_path, "optim.max_steps=null", "optim.epochs=1", "optim.stop_at_step=1")
    reset_accelerate()
    trainer = Trainer(cfg)
    cached = json.loads((tmp_path / "data_count.json").read_text())
    assert trainer.total_steps == cached["micro_batches"] > 10
    trainer.train()
    reset_accelerate()
    resumed = Trainer(debug_config(tmp_path, "optim.max_steps=null", "optim.epochs=1"))
    assert resumed.total_steps == trainer.total_steps and resumed.step == 1


@pytest.mark.slow
def test_compile_windows_trains_through_compiled_layers_with_the_eager_losses(tmp_path, monkeypatch):
    """`model.compile_windows` compiles the layers (memory/compiled.py); AOTAutograd's `aot_eager`
    backend stands in for inductor, so the losses must be the eager layers'. A resume may switch it."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from memorag.memory import core as memory_model_module

    original = memory_model_module.CompiledLayers
    modes = []

    def aot_eager_layers(layers, mode, backend, dynamic):
        modes.append(mode)
        return original(layers, mode, "aot_eager", dynamic)

    monkeypatch.setattr(memory_model_module, "CompiledLayers", aot_eager_layers)
    settings = ["optim.max_steps=2", "checkpoint.every_steps=100"]
    run(debug_config(tmp_path / "eager", *settings))
    torch._dynamo.reset()
    counters.clear()
    run(debug_config(tmp_path / "compiled", *settings, "model.compile_windows=default"))
    assert modes == [None] and counters["stats"]["unique_graphs"] >= 1
    eager, compiled = train_losses(tmp_path / "eager"), train_losses(tmp_path / "compiled")
    assert sorted(compiled) == [1, 2]
    for step in compiled:
        assert compiled[step] == pytest.approx(eager[step], rel=1e-5), step
    resumed = run(debug_config(tmp_path / "compiled", "optim.max_steps=3", "checkpoint.every_steps=100"))
    assert resumed["step"] == 3 and resumed["reason"] == "finished"
    records = [json.loads(line) for line in (tmp_path / "compiled" / "train_log.jsonl").read_text().splitlines()]
    [event] = [r for r in records if r["event"] == "resume"]
    assert {"key": "model.compile_windows", "from": "default", "to": None, "kind": "adjustable"} in event["changes"]
    torch._dynamo.reset()


def test_checkpoints_written_in_parts_stay_under_the_cap_and_resume_exactly(tmp_path):
    cap = 20_000  # bytes: the debug model's weights (66 KB) and optimizer state (139 KB) become parts
    settings = ["optim.max_steps=6", "checkpoint.every_steps=3", f"checkpoint.max_file_mb={cap / 10**6}"]
    run(quick_config(tmp_path / "straight", *settings))
    first = run(quick_config(tmp_path / "resumed", *settings, "optim.stop_at_step=3"))
    assert first["step"] == 3
    folder = tmp_path / "resumed" / "checkpoint-3"
    sizes = {path.name: path.stat().st_size for path in folder.iterdir()}
    assert max(sizes.values()) <= cap
    assert {"optimizer.pt.part-000", "optimizer.pt.part-006", "memory_weights.safetensors.part-000"} <= set(sizes)
    assert "optimizer.pt" not in sizes and "memory_weights.safetensors" not in sizes
    assert set(ckpt.read_trainer_state(folder)[ckpt.FILES]) == set(sizes) - {ckpt.TRAINER_STATE}
    assert ckpt.list_checkpoints(tmp_path / "resumed") == [(3, folder)]
    second = run(quick_config(tmp_path / "resumed", *settings))
    assert second["step"] == 6 and second["reason"] == "finished"
    assert {path.name: path.stat().st_size for path in folder.iterdir()} == sizes  # the joined files removed again
    straight, resumed = train_losses(tmp_path / "straight"), train_losses(tmp_path / "resumed")
    assert [resumed[step] for step in (4, 5, 6)] == [straight[step] for step in (4, 5, 6)]
    a = load_file(str(tmp_path / "straight" / "final" / "memory_weights.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "final" / "memory_weights.safetensors"))
    for name in a:
        assert torch.equal(a[name], b[name]), name  # bit for bit
    part = folder / "optimizer.pt.part-003"
    part.write_bytes(part.read_bytes()[:-1])
    assert resume.damage(folder) == f"{part} has {cap - 1} bytes where {cap} were written (truncated or overwritten)"


def test_parts_are_joined_whole_while_read_and_removed_after(tmp_path):
    whole = tmp_path / "optimizer.pt"
    data = bytes(range(256)) * 40
    whole.write_bytes(data)
    ckpt.split_large_files(tmp_path, 4_000)
    assert sorted(path.name for path in tmp_path.iterdir()) == [f"optimizer.pt.part-00{i}" for i in range(3)]
    with ckpt.whole_files(tmp_path):
        assert whole.read_bytes() == data
    assert not whole.exists()
    with pytest.raises(RuntimeError), ckpt.whole_files(tmp_path):
        raise RuntimeError("a resume that fails")
    assert not whole.exists()
    whole.write_bytes(data[:100])  # what an interrupted resume could leave: joined again from the parts
    with ckpt.whole_files(tmp_path):
        assert whole.read_bytes() == data
    assert sorted(path.name for path in tmp_path.iterdir()) == [f"optimizer.pt.part-00{i}" for i in range(3)]
