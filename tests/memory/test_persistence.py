"""Memories and memory weights round-trip bit-exactly; bad files get clear errors."""

import json

import pytest
import torch

from memorag.memory import MemoryConfig, MemoryFileError, MemoryMismatchError, MemoryModel, MemoryWeightsError
from memorag.memory.state import Memory

from .conftest import perturb_memory_parameters, random_ids, tiny_base, tiny_memory_model


def test_memory_round_trip_is_bit_exact(tmp_path):
    model = tiny_memory_model("qwen3")
    memory = model.memorize(random_ids(70)[0].tolist())
    memory.save(tmp_path / "memory")
    loaded = Memory.load(tmp_path / "memory")
    assert loaded.state == memory.state and loaded.identity == memory.identity
    assert loaded.content_sha256 == memory.content_sha256 and loaded.ratio == memory.ratio
    for a, b in zip(memory.keys + memory.values, loaded.keys + loaded.values, strict=True):
        assert torch.equal(a, b)
    prompt = [3, 4, 5]
    assert model.generate_ids(prompt, memory=loaded, max_new_tokens=10) == model.generate_ids(
        prompt, memory=memory, max_new_tokens=10
    )


def test_saving_over_an_existing_memory_replaces_it(tmp_path):
    model = tiny_memory_model("llama")
    model.memorize([5] * 20).save(tmp_path / "m")
    model.memorize([6] * 40).save(tmp_path / "m")
    assert Memory.load(tmp_path / "m").num_tokens == 40
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no temporary folders left behind


def test_truncated_corrupt_and_foreign_memories_are_refused(tmp_path):
    model = tiny_memory_model("llama")
    model.memorize(random_ids(40)[0].tolist()).save(tmp_path / "m")
    tensors = tmp_path / "m" / "memory.safetensors"
    data = tensors.read_bytes()
    tensors.write_bytes(data[: len(data) // 2])
    with pytest.raises(MemoryFileError, match="truncated or corrupt"):
        Memory.load(tmp_path / "m")
    with pytest.raises(MemoryFileError, match="not a saved memory"):
        Memory.load(tmp_path / "nothing-here")
    (tmp_path / "m" / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(MemoryFileError, match="does not describe a memorag-memory"):
        Memory.load(tmp_path / "m")
    (tmp_path / "m" / "manifest.json").write_text("{not json")
    with pytest.raises(MemoryFileError, match="not valid JSON"):
        Memory.load(tmp_path / "m")


def test_a_memory_from_other_weights_or_settings_is_refused():
    model = tiny_memory_model("llama")
    memory = model.memorize(random_ids(40)[0].tolist())
    other_weights = tiny_memory_model("llama", seed=5)
    with pytest.raises(MemoryMismatchError, match="memory_weights_sha256"):
        other_weights.generate_ids([3], memory=memory, max_new_tokens=1)
    other_settings = tiny_memory_model("llama", ratios=[8])
    with pytest.raises(MemoryMismatchError, match="memory_config"):
        other_settings.memorize([3, 4], memory=memory)


def test_memory_weights_round_trip(tmp_path):
    model = tiny_memory_model("qwen2", memory_params="qkvo")
    model.save_memory_weights(tmp_path / "w")
    from safetensors.torch import load_file

    saved = load_file(str(tmp_path / "w" / "memory_weights.safetensors"))
    assert set(saved) == set(model.memory_parameters())  # memory parameters only, nothing of the base
    fresh = MemoryModel(tiny_base("qwen2"), MemoryConfig(window=16, ratios=[4], memory_params="qkvo"))
    from memorag.memory.checkpoint import load_memory_weights

    load_memory_weights(fresh, tmp_path / "w")
    for name, param in model.memory_parameters().items():
        assert torch.equal(param, fresh.memory_parameters()[name])
    ids = random_ids(50)
    with torch.no_grad():
        torch.testing.assert_close(fresh(ids, return_logits=True).logits, model(ids, return_logits=True).logits,
                                   atol=0, rtol=0)


def test_bad_memory_weights_are_refused(tmp_path):
    model = tiny_memory_model("llama")
    model.save_memory_weights(tmp_path / "w")
    other = MemoryModel(tiny_base("llama", hidden_size=32, intermediate_size=48), MemoryConfig(window=16))
    from memorag.memory.checkpoint import load_memory_weights

    with pytest.raises(MemoryWeightsError, match="not for this base model"):
        load_memory_weights(other, tmp_path / "w")
    with pytest.raises(MemoryWeightsError, match="holds no memory weights"):
        load_memory_weights(model, tmp_path / "missing")
    path = tmp_path / "w" / "memory_weights.safetensors"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(MemoryWeightsError, match="truncated or corrupt"):
        load_memory_weights(model, tmp_path / "w")


def tiny_tokenizer():
    """A word-level tokenizer over the tiny models' vocabulary (a fake: letter pairs)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, **{word(i): i for i in range(2, 96)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token=word(2)))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token=word(2))


def word(index: int) -> str:
    return chr(97 + index // 26) + chr(97 + index % 26)


def test_from_pretrained_local_directory_with_memory_weights(tmp_path):
    tiny_base("llama").save_pretrained(tmp_path / "base")
    tiny_tokenizer().save_pretrained(tmp_path / "base")
    trained = MemoryModel.from_pretrained(str(tmp_path / "base"), config=MemoryConfig(window=16, ratios=[2]))
    perturb_memory_parameters(trained, seed=3)
    trained.save_memory_weights(tmp_path / "w")
    loaded = MemoryModel.from_pretrained(str(tmp_path / "base"), memory_weights=tmp_path / "w")
    assert loaded.config == trained.config
    text = " ".join(word(2 + (i * 7) % 90) for i in range(60))
    memory = trained.memorize(text)
    assert memory.num_tokens == 60 and not memory.chat  # no chat template: the raw text
    prompt = f"{word(5)} {word(6)}"
    assert loaded.generate(prompt, memory=memory, max_new_tokens=8) == trained.generate(
        prompt, memory=memory, max_new_tokens=8
    )
    other_ratio = MemoryModel.from_pretrained(str(tmp_path / "base"), memory_weights=tmp_path / "w",
                                              config=MemoryConfig(window=16, ratios=[4]))
    assert other_ratio.config.ratios == [4] and other_ratio.memory_weights_hash() == loaded.memory_weights_hash()
    with pytest.raises(ValueError, match="memory_params"):
        MemoryModel.from_pretrained(str(tmp_path / "base"), memory_weights=tmp_path / "w",
                                    config=MemoryConfig(window=16, ratios=[2], memory_params="qkvo"))
