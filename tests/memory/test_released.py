"""Released memory-model checkpoints load as they are and compute what the public code computes.

The fixtures (tests/fixtures/official_beacon, see its README) are tiny checkpoints in the
released format with the public beacon implementation's outputs on them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from memorag.memory import MemoryConfig, MemoryModel, MemoryWeightsError
from memorag.memory.released import ReleasedCheckpointError, export_released

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "official_beacon"
CASES = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
TOLERANCE = 1e-4


def _load(name: str) -> tuple[MemoryModel, dict[str, torch.Tensor], dict]:
    folder = FIXTURES / name
    model = MemoryModel.from_pretrained(str(folder), dtype=torch.float32)
    return model, load_file(str(folder / "expected.safetensors")), json.loads((folder / "expected.json").read_text())


def _unrotated(model: MemoryModel, keys: torch.Tensor, first_position: int) -> torch.Tensor:
    """Our cached keys [B, H_kv, n, d] rotated back from positions first_position.. to 0."""
    positions = torch.arange(first_position, first_position + keys.shape[2])
    return model.rotate(keys, -positions)


def test_the_six_fixtures_are_here():
    assert len(CASES) == 6


@pytest.mark.parametrize("name", CASES)
def test_settings_are_read_from_the_released_config(name):
    model, _, meta = _load(name)
    assert model.config.window == meta["window"] and model.config.ratios == [meta["ratio"]]
    assert (model.config.attention, model.config.memory_params, model.config.ratio_mix) == (
        "full-coverage", "qkv", "fixed")
    assert not any(key.startswith("beacon_") for key in vars(model.base_model.config))
    assert model.tokenizer is None


@pytest.mark.parametrize("name", CASES)
def test_logits_loss_and_memory_equal_the_public_code(name):
    model, expected, meta = _load(name)
    ids = expected["input_ids"]
    with torch.no_grad():
        output = model(ids, labels=ids, return_logits=True)
        memory = model.memorize(ids[0].tolist(), show_progress=False)
    last = expected["last_window_logits"]
    torch.testing.assert_close(output.logits[:, -last.shape[1]:], last, atol=TOLERANCE, rtol=0)
    assert output.loss.item() == pytest.approx(meta["loss"], abs=TOLERANCE)

    entries = memory.num_entries
    assert entries == meta["memory_entries_after_forward"]
    assert memory.keys[0].shape[2] - entries == meta["raw_rows_after_forward"]
    for layer in range(len(memory.keys)):
        keys, values = memory.keys[layer], memory.values[layer]
        torch.testing.assert_close(_unrotated(model, keys[:, :, :entries], 0),
                                   expected[f"memory.{layer}.key_before_rope"], atol=TOLERANCE, rtol=0)
        torch.testing.assert_close(values[:, :, :entries], expected[f"memory.{layer}.value"], atol=TOLERANCE, rtol=0)
        if meta["raw_rows_after_forward"]:
            torch.testing.assert_close(_unrotated(model, keys[:, :, entries:], entries),
                                       expected[f"raw.{layer}.key_before_rope"], atol=TOLERANCE, rtol=0)
            torch.testing.assert_close(values[:, :, entries:], expected[f"raw.{layer}.value"], atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("name", CASES)
def test_greedy_decoding_equals_the_public_code(name):
    model, expected, meta = _load(name)
    ids = expected["input_ids"][0].tolist()
    assert model.generate_ids(ids, max_new_tokens=12) == meta["greedy_new_tokens"]
    # the same from a memory of all but the last token, the last one as the prompt
    memory = model.memorize(ids[:-1], show_progress=False)
    assert model.generate_ids(ids[-1:], memory=memory, max_new_tokens=12) == meta["greedy_new_tokens"]


def test_text_needs_a_tokenizer():
    model, _, _ = _load(CASES[0])
    with pytest.raises(ValueError, match="no tokenizer"):
        model.memorize("some text")


def test_export_to_the_released_format_and_back(tmp_path):
    model, expected, _ = _load("qwen2-r4-w32-n150")
    ids = expected["input_ids"]
    exported = export_released(model, tmp_path / "released")
    config = json.loads((exported / "config.json").read_text())
    assert config["beacon_pos"] == "interleave" and config["beacon_ratio"] == [4] and config["beacon_window"] == 32
    tensors = load_file(str(exported / "model.safetensors"))
    assert tensors["model.beacon_embed_tokens.weight"].shape == (1, 64)
    assert "model.layers.1.self_attn.beacon_q_proj.bias" in tensors
    again = MemoryModel.from_pretrained(str(exported), dtype=torch.float32)
    for name, param in model.memory_parameters().items():
        assert torch.equal(param, again.memory_parameters()[name]), name
    with torch.no_grad():
        torch.testing.assert_close(again(ids, return_logits=True).logits, model(ids, return_logits=True).logits)

    # back: our own memory-weights folder, read over a plain base model
    model.save_memory_weights(tmp_path / "ours")
    model.base_model.save_pretrained(tmp_path / "base", state_dict=model.base_state_dict())
    plain = json.loads((tmp_path / "base" / "config.json").read_text())
    assert not any(key.startswith("beacon_") for key in plain)
    ours = MemoryModel.from_pretrained(str(tmp_path / "base"), memory_weights=tmp_path / "ours", dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, return_logits=True).logits, model(ids, return_logits=True).logits)


@pytest.mark.parametrize("key, value, message", [
    ("beacon_sink_size", 4, "beacon_sink_size=4"),
    ("beacon_parallel_window", 2, "beacon_parallel_window=2"),
    ("beacon_pos", "append", "beacon_pos='append'"),
    ("beacon_stride", 8, "stride other than the window"),
    ("beacon_param", ["q", "k"], "beacon_param"),
    ("beacon_attend_prev", False, "beacon_attend_prev"),
    ("beacon_ratio", [0], "ratio 0"),
    ("beacon_mystery", 1, "does not know"),
])
def test_unsupported_settings_are_refused_by_name(tmp_path, key, value, message):
    folder = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / CASES[0], folder)
    config = json.loads((folder / "config.json").read_text())
    config[key] = value
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ReleasedCheckpointError, match=message):
        MemoryModel.from_pretrained(str(folder), dtype=torch.float32)


def test_a_list_of_trained_ratios_memorizes_at_one_stated_ratio(tmp_path):
    folder = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "qwen2-r4-w32-n150", folder)
    config = json.loads((folder / "config.json").read_text())
    config["beacon_ratio"] = [2, 4, 8]
    (folder / "config.json").write_text(json.dumps(config))
    assert MemoryModel.from_pretrained(str(folder)).config.ratios == [4]
    chosen = MemoryModel.from_pretrained(str(folder), config=MemoryConfig(window=32, ratios=[8]))
    assert chosen.config.ratios == [8]


def test_memory_weights_beside_a_released_checkpoint_are_refused(tmp_path):
    with pytest.raises(ValueError, match="carries its own memory weights"):
        MemoryModel.from_pretrained(str(FIXTURES / CASES[0]), memory_weights=tmp_path)


def test_weights_of_the_earlier_layout_are_refused(tmp_path):
    model, _, _ = _load(CASES[0])
    model.save_memory_weights(tmp_path / "w")
    document = json.loads((tmp_path / "w" / "memory_config.json").read_text())
    assert document["layout"] == "interleave"
    document["format_version"] = 1
    del document["layout"]
    (tmp_path / "w" / "memory_config.json").write_text(json.dumps(document))
    from memorag.memory.checkpoint import load_memory_weights

    with pytest.raises(MemoryWeightsError, match="earlier layout"):
        load_memory_weights(model, tmp_path / "w")
    document.update(format_version=2, layout="append")
    (tmp_path / "w" / "memory_config.json").write_text(json.dumps(document))
    with pytest.raises(MemoryWeightsError, match="'append' layout"):
        load_memory_weights(model, tmp_path / "w")
