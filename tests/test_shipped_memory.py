"""Memory weights by name: "auto" (the default), "embedded" (the shipped trained weights), "untrained".

The shipped folder is the one in the package (`memorag/weights/`); the other cases use a
tiny random base (tests/memory/conftest.py) so they say nothing about the trained weights.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from memorag.generation.models import (
    SHIPPED_MEMORY_DIR,
    is_memory_weights_id,
    memory_weights_are_untrained,
    memory_weights_for,
    shipped_memory_weights,
    verify_memory_weights,
)
from memorag.memory import MemoryConfig, MemoryModel
from memorag.memory.checkpoint import CONFIG, read_memory_weights_config
from memorag.pipeline import PipelineConfig
from tests.memory.conftest import tiny_base


def test_the_shipped_weights_are_in_the_package_small_and_intact():
    verify_memory_weights(SHIPPED_MEMORY_DIR)  # both files, the manifest, the sha256 of the weights
    sizes = sum(path.stat().st_size for path in SHIPPED_MEMORY_DIR.iterdir() if path.is_file())
    assert sizes <= 5 * 10**6  # weights stay small enough for git: stored in bf16
    saved = read_memory_weights_config(SHIPPED_MEMORY_DIR)
    assert saved.ratio_mix == "fixed" and len(saved.ratios) == 1  # memorizes at one stated ratio
    document = json.loads((SHIPPED_MEMORY_DIR / CONFIG).read_text())
    assert document["base"]["model_type"] == "llama" and document["base"]["hidden_size"] == 576
    assert document["trained_memory_config"]["ratio_mix"] == "step-random"  # what it was trained with


def test_names_resolve_by_base(caplog):
    assert memory_weights_for(None, "auto") == SHIPPED_MEMORY_DIR == shipped_memory_weights()
    assert memory_weights_for("embedded", "EMBEDDED") == SHIPPED_MEMORY_DIR
    assert memory_weights_for(None, "untrained") is None and memory_weights_for(None, None) is None
    with caplog.at_level(logging.INFO, logger="memorag.memory.checkpoint"):
        assert memory_weights_for("some/other-base", "auto") is None  # nothing trained for it: untrained copies
    assert "untrained copies" in caplog.text
    with pytest.raises(ValueError, match="trained for the embedded SmolLM2"):
        memory_weights_for("some/other-base", "embedded")
    assert memory_weights_are_untrained("some/other-base", "auto") and not memory_weights_are_untrained(None, "auto")
    assert not is_memory_weights_id("auto") and not is_memory_weights_id("untrained")


def test_the_pipeline_defaults_to_auto_and_keeps_names_as_names():
    assert PipelineConfig().memory_weights == "auto"
    assert PipelineConfig(memory_weights="Untrained").memory_weights == "untrained"  # not made a path


def test_saved_weights_record_the_ratio_they_memorize_at(tmp_path):
    trained_with = MemoryConfig(window=16, ratios=[2, 4, 8], ratio_mix="step-random")
    model = MemoryModel(tiny_base("llama"), trained_with)
    model.save_memory_weights(tmp_path / "largest")
    assert read_memory_weights_config(tmp_path / "largest") == MemoryConfig(window=16, ratios=[8])
    model.save_memory_weights(tmp_path / "stated", inference_ratio=4)
    assert read_memory_weights_config(tmp_path / "stated").ratios == [4]
    document = json.loads((tmp_path / "stated" / CONFIG).read_text())
    assert MemoryConfig.from_dict(document["trained_memory_config"]) == trained_with
    fixed = MemoryModel(tiny_base("llama"), MemoryConfig(window=16, ratios=[4]))
    fixed.save_memory_weights(tmp_path / "fixed")
    assert "trained_memory_config" not in json.loads((tmp_path / "fixed" / CONFIG).read_text())
    with pytest.raises(ValueError, match="does not divide"):
        model.save_memory_weights(tmp_path / "bad", inference_ratio=3)


@pytest.mark.parametrize("weights", ["auto", "untrained"])
def test_from_pretrained_on_the_embedded_model(weights):
    model = MemoryModel.from_pretrained(memory_weights=weights, dtype=torch.float32)
    fresh = MemoryModel.from_pretrained(memory_weights=None, dtype=torch.float32)
    same = model.memory_weights_hash() == fresh.memory_weights_hash()
    assert same == (weights == "untrained")
    if weights == "auto":
        assert model.config == read_memory_weights_config(SHIPPED_MEMORY_DIR)


def test_the_shipped_weights_are_stored_in_bf16_and_training_can_start_from_them():
    from safetensors.torch import load_file

    from memorag.config import load_config
    from memorag.training.build import build_model
    from memorag.training.config import TrainConfig

    document = json.loads((SHIPPED_MEMORY_DIR / CONFIG).read_text())
    assert document["weights_dtype"] == "bfloat16"
    assert {t.dtype for t in load_file(str(SHIPPED_MEMORY_DIR / "memory_weights.safetensors")).values()} == {
        torch.bfloat16}
    cfg = load_config(TrainConfig, Path(__file__).resolve().parents[1] / "configs/pretrain/smollm2-mix-cpu.yaml", ["model.memory_weights=embedded"])
    model = build_model(cfg.model, cfg.memory)
    shipped = MemoryModel.from_pretrained(memory_weights="embedded", dtype=torch.float32)
    mine, theirs = model.memory_parameters(), shipped.memory_parameters()
    assert set(mine) == set(theirs)
    assert all(torch.equal(mine[name].float(), theirs[name].float()) for name in mine)
