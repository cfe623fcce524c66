"""Low-rank (LoRA through peft) memory projections: same start, trainable factors only, saved and reloaded."""

from __future__ import annotations

import json

import pytest
import torch

from memorag.benchmarking.roofline import Shape
from memorag.memory import MemoryConfig, MemoryModel
from memorag.memory.checkpoint import CONFIG, load_memory_weights
from memorag.memory.lowrank import apply_lowrank, describe_projections, merge_lowrank
from tests.memory.conftest import random_ids, tiny_base


def fresh(memory_params="qkv", seed=0, family="llama"):
    config = MemoryConfig(window=16, ratios=[4], memory_params=memory_params)
    return MemoryModel(tiny_base(family, seed=seed), config).eval()


def outputs(model, ids):
    with torch.no_grad():
        return model(ids, return_logits=True).logits


def train_a_little(model, ids, steps=2):
    optimizer = torch.optim.SGD(list(model.memory_parameters().values()), lr=0.5)
    model.train()
    for _ in range(steps):
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


@pytest.mark.parametrize("memory_params", ["qkv", "qkvo"])
def test_untrained_lowrank_computes_what_the_untrained_copies_compute(memory_params):
    ids = random_ids(48)
    full = fresh(memory_params)
    lowrank = apply_lowrank(fresh(memory_params), rank=4)
    assert torch.allclose(outputs(full, ids), outputs(lowrank, ids), atol=1e-6)
    names = set(lowrank.memory_parameters())
    targets = sorted(memory_params)
    assert describe_projections(lowrank) == {"kind": "lowrank", "rank": 4, "alpha": 4.0, "targets": targets,
                                             "library": "peft"}
    assert names == {"embedding"} | {f"layers.{i}.{t}.lora_{ab}.default.weight" for i in range(2) for t in targets
                                     for ab in "AB"}


def test_only_the_factors_and_the_embedding_get_gradients():
    model = apply_lowrank(fresh(), rank=4)
    train_a_little(model, random_ids(48), steps=1)
    frozen = [module.base_layer.weight for attention in model.memory_attentions() for module in attention.memory.values()]
    assert all(not w.requires_grad and w.grad is None for w in frozen)
    base = fresh()
    for attention, reference in zip(model.memory_attentions(), base.memory_attentions()):
        assert torch.equal(attention.memory["q"].base_layer.weight, reference.memory["q"].weight)  # copies unchanged
    assert float(model.memory_parameters()["layers.0.q.lora_B.default.weight"].detach().abs().sum()) > 0


def test_lowrank_weights_save_small_and_reload_through_the_checkpoint_format(tmp_path):
    ids = random_ids(48, seed=3)
    trained = apply_lowrank(fresh(), rank=2, alpha=4.0)
    train_a_little(trained, ids)
    trained.save_memory_weights(tmp_path / "w")
    document = json.loads((tmp_path / "w" / CONFIG).read_text())
    assert document["projections"] == {"kind": "lowrank", "rank": 2, "alpha": 4.0, "targets": ["k", "q", "v"],
                                       "library": "peft"}
    reloaded = fresh()  # full copies: loading applies the recorded low-rank form
    load_memory_weights(reloaded, tmp_path / "w")
    assert describe_projections(reloaded)["rank"] == 2
    assert torch.allclose(outputs(trained, ids), outputs(reloaded, ids), atol=1e-6)
    assert not torch.allclose(outputs(fresh(), ids), outputs(reloaded, ids), atol=1e-4)
    full_size = sum(p.numel() for p in fresh().memory_parameters().values())
    assert sum(p.numel() for p in reloaded.memory_parameters().values()) < full_size / 2


def test_mismatched_projections_are_refused(tmp_path):
    trained = apply_lowrank(fresh(), rank=2)
    trained.save_memory_weights(tmp_path / "low")
    other = apply_lowrank(fresh(), rank=3)
    with pytest.raises(ValueError, match="rank"):
        load_memory_weights(other, tmp_path / "low")
    full = fresh()
    full.save_memory_weights(tmp_path / "full")
    with pytest.raises(ValueError, match="full"):
        load_memory_weights(apply_lowrank(fresh(), rank=2), tmp_path / "full")
    load_memory_weights(full, tmp_path / "full")  # full into full still loads


def test_lowrank_starts_from_untrained_copies_only():
    model = fresh()
    with torch.no_grad():
        next(iter(model.memory_attentions())).memory["q"].weight.add_(0.1)
    with pytest.raises(ValueError, match="start from untrained copies"):
        apply_lowrank(model, rank=2)
    with pytest.raises(ValueError, match="rank >= 1"):
        apply_lowrank(fresh(), rank=0)


def test_merging_gives_full_projections_with_the_same_outputs():
    ids = random_ids(48, seed=5)
    model = apply_lowrank(fresh(), rank=2)
    train_a_little(model, ids)
    before = outputs(model, ids)
    merge_lowrank(model)
    assert describe_projections(model) == {"kind": "full"}
    assert set(model.memory_parameters()) == set(fresh().memory_parameters())
    assert torch.allclose(before, outputs(model, ids), atol=1e-5)


def test_the_embedded_models_lowrank_memory_fits_in_10_mb():
    shape = Shape()  # SmolLM2-135M: per layer q [576 -> 576], k and v [576 -> 192]
    per_rank = shape.layers * sum(shape.hidden + out for out in (shape.heads * shape.head_dim,
                                                                  shape.kv_heads * shape.head_dim,
                                                                  shape.kv_heads * shape.head_dim))
    full = shape.layers * shape.hidden * shape.head_dim * (shape.heads + 2 * shape.kv_heads)
    assert full * 4 > 60e6  # the full projections in fp32: too large to ship
    assert (16 * per_rank + shape.hidden) * 4 < 10e6  # rank 16 in fp32


def test_a_training_run_with_memory_rank_saves_and_resumes_low_rank_weights(tmp_path):
    from memorag.training.build import build_model
    from memorag.training.trainer import Trainer
    from tests.training.helpers import debug_config, reset_accelerate, train_losses

    out = tmp_path / "run"
    cfg = debug_config(out, "model.memory_rank=4", "optim.max_steps=4", "optim.stop_at_step=2")
    Trainer(cfg).train()
    reset_accelerate()
    Trainer(debug_config(out, "model.memory_rank=4", "optim.max_steps=4")).train()  # resumes at step 2
    reset_accelerate()
    straight = tmp_path / "straight"
    Trainer(debug_config(straight, "model.memory_rank=4", "optim.max_steps=4")).train()
    assert train_losses(out) == pytest.approx(train_losses(straight), rel=1e-6)
    document = json.loads((out / "final" / CONFIG).read_text())
    assert document["projections"]["kind"] == "lowrank" and document["projections"]["rank"] == 4
    loaded = build_model(cfg.model.__class__(**{**cfg.model.__dict__, "memory_rank": 0,
                                                 "memory_weights": str(out / "final")}), cfg.memory)
    assert describe_projections(loaded)["rank"] == 4


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_families_with_biases_and_norms_reload_the_same(family, tmp_path):
    ids = random_ids(48, seed=7)
    model = apply_lowrank(fresh(family=family), rank=2)
    assert torch.allclose(outputs(fresh(family=family), ids), outputs(model, ids), atol=1e-6)
    train_a_little(model, ids)
    model.save_memory_weights(tmp_path / "w")
    reloaded = fresh(family=family)
    load_memory_weights(reloaded, tmp_path / "w")
    assert torch.allclose(outputs(model, ids), outputs(reloaded, ids), atol=1e-6)


@pytest.mark.slow
def test_lowrank_weights_of_the_embedded_model_load_through_from_pretrained(tmp_path):
    model = apply_lowrank(MemoryModel.from_pretrained(memory_weights="untrained", config=MemoryConfig(window=64, ratios=[4])), rank=2)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.memory_parameters().items():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    model.save_memory_weights(tmp_path / "w")
    assert (tmp_path / "w" / "memory_weights.safetensors").stat().st_size < 1e6
    loaded = MemoryModel.from_pretrained(memory_weights=tmp_path / "w")
    assert describe_projections(loaded)["rank"] == 2
    text = "In the beginning God created the heaven and the earth. " * 12
    mine, theirs = model.memorize(text, show_progress=False), loaded.memorize(text, show_progress=False)
    assert mine.num_entries == theirs.num_entries > 0
    assert all(torch.equal(a, b) for a, b in zip(mine.keys, theirs.keys))
    assert loaded.generate("Who created the earth?", memory=theirs, max_new_tokens=4) == model.generate(
        "Who created the earth?", memory=mine, max_new_tokens=4)
