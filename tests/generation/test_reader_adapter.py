"""The embedded reader (memorag/generation/reader_adapter.py): an adapter merged into a second model that holds the
memory model's base tensors but the adapted projections.

A tiny random Llama with memory stands in for the embedded LM, with an adapter made here (peft, random
nonzero weights); the shipped adapter is checked on the real embedded LM at the end.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from memorag.generation import GeneratorError, load_generator
from memorag.generation.reader_adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, merge_adapter, shared_copy
from memorag.runtime import embedded
from tests.pipeline.conftest import tiny_model


def make_adapter(model, folder, layers=(1,), targets=("q_proj", "v_proj"), seed=0):
    """A peft LoRA adapter for `model`'s base with random nonzero weights, saved in `folder`; the peft model."""
    from peft import LoraConfig, get_peft_model

    base = shared_copy(model)
    peft_model = get_peft_model(copy.deepcopy(base), LoraConfig(
        r=4, lora_alpha=8, target_modules=list(targets), layers_to_transform=list(layers)))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    peft_model.save_pretrained(str(folder))
    return peft_model.eval()


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_the_copy_holds_the_base_tensors_and_reads_as_the_base():
    model = tiny_model()
    copied = shared_copy(model)
    base = {name: tensor for name, tensor in model.base_tensors().items()}
    assert all(parameter is base[name] for name, parameter in copied.named_parameters(remove_duplicate=False))
    assert not any(tensor.is_meta for tensor in copied.state_dict().values())
    ids = torch.tensor([[2, 5, 9, 14, 3, 7]])
    assert torch.equal(logits(copied, ids), logits(model.base_model, ids))


def test_the_merged_reader_answers_as_the_adapter_and_leaves_the_memory_model_unchanged(tmp_path):
    model = tiny_model()
    before = {name: tensor.clone() for name, tensor in model.base_state_dict().items()}
    reference = make_adapter(model, tmp_path)
    reader = merge_adapter(shared_copy(model), tmp_path)
    ids = torch.tensor([[2, 5, 9, 14, 3, 7, 11, 4]])
    assert torch.allclose(logits(reader, ids), logits(reference, ids), atol=1e-5)
    assert not torch.allclose(logits(reader, ids), logits(model.base_model, ids), atol=1e-3)
    after = model.base_state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)  # the memory reads the base as before
    layers, base_layers = reader.model.layers, model.base_model.model.layers
    assert layers[1].self_attn.q_proj.weight is not base_layers[1].self_attn.base_layer.q_proj.weight
    assert layers[0].self_attn.q_proj.weight is base_layers[0].self_attn.base_layer.q_proj.weight
    assert layers[1].self_attn.k_proj.weight is base_layers[1].self_attn.base_layer.k_proj.weight


def test_an_adapter_for_another_base_or_a_folder_without_one_is_refused(tmp_path):
    model = tiny_model()
    make_adapter(model, tmp_path, layers=(1,))
    settings = json.loads((tmp_path / ADAPTER_CONFIG).read_text())
    settings["target_modules"] = ["gate_proj"]  # the saved tensors name q_proj and v_proj
    (tmp_path / ADAPTER_CONFIG).write_text(json.dumps(settings))
    with pytest.raises(GeneratorError, match="does not fit"):
        merge_adapter(shared_copy(model), tmp_path)
    (tmp_path / ADAPTER_WEIGHTS).unlink()
    with pytest.raises(GeneratorError, match=f"lacks {ADAPTER_WEIGHTS}.*embedded-base"):
        merge_adapter(shared_copy(model), tmp_path)


def test_embedded_names_the_reader_and_embedded_base_the_lm_as_it_comes(tmp_path, monkeypatch):
    model = tiny_model()
    model.name = embedded.EMBEDDED_LM  # stands in for the embedded LM
    make_adapter(model, tmp_path)
    monkeypatch.setattr(embedded, "SHIPPED_READER_DIR", tmp_path)
    for spec in ("embedded", "smollm2", embedded.EMBEDDED_LM):
        reader = load_generator(spec, memory_model=model)
        assert reader.name.startswith(f"{embedded.EMBEDDED_READER}-") and reader.shared
        assert reader.model is not model.base_model
    default = load_generator(None, memory_model=model)  # over the embedded memory model, the reader
    assert default.name.startswith(f"{embedded.EMBEDDED_READER}-") and default.model is not model.base_model
    for spec in ("embedded-base", "memory"):
        base = load_generator(spec, memory_model=model)
        assert base.model is model.base_model and base.name == embedded.EMBEDDED_LM
    model.name = "embedded"  # as the training stages name the embedded LM they build
    assert load_generator(None, memory_model=model).name.startswith(f"{embedded.EMBEDDED_READER}-")
    model.name = "some/other-model"  # over any other memory model the default is its base
    assert load_generator(None, memory_model=model).model is model.base_model


def test_the_shipped_reader_fits_the_embedded_lm_and_changes_only_its_adapted_projections():
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(embedded.resolve_lm("embedded"), dtype=torch.float32)
    before = {name: parameter.detach().clone() for name, parameter in base.named_parameters()}
    reader = merge_adapter(base, embedded.SHIPPED_READER_DIR)  # refuses tensors that find no module
    changed = {name for name, parameter in reader.named_parameters() if not torch.equal(parameter, before[name])}
    assert set(before) == {name for name, _ in reader.named_parameters()}
    projections = tuple(f"{name}.weight" for name in json.loads(
        (embedded.SHIPPED_READER_DIR / ADAPTER_CONFIG).read_text())["target_modules"])
    assert changed and all(name.endswith(projections) for name in changed)
    files = [path for path in embedded.SHIPPED_READER_DIR.rglob("*") if path.is_file()]
    assert max(path.stat().st_size for path in files) < 5 * 10**6  # no file of the repository above 5 MB
    assert sum(path.stat().st_size for path in files) < 5.3 * 10**6  # rank 8 on 7 projections x 30 layers: 4.9 MB


def test_a_reader_s_memory_writer_is_its_base_without_the_adapter(tmp_path, monkeypatch):
    """The adapter writes answers only: the text read as memory (Lite's gists and clues) is the base's."""
    from memorag.generation import LocalGenerator

    model = tiny_model()
    model.name = embedded.EMBEDDED_LM
    make_adapter(model, tmp_path)
    monkeypatch.setattr(embedded, "SHIPPED_READER_DIR", tmp_path)
    reader = load_generator(None, memory_model=model, repetition_penalty=1.2, refusal_margin=2.0)
    writer = reader.memory_writer
    assert writer is not reader and writer.model is model.base_model and writer.name == embedded.EMBEDDED_LM
    assert writer.refusal_margin == 0 and writer.repetition_penalty == 1.2 and writer.memory_writer is writer
    assert reader.describe()["memory_writer"] == embedded.EMBEDDED_LM
    base = load_generator("embedded-base", memory_model=model)
    assert base.memory_writer is base
    # a reader loaded beside another memory model merges into a copy: the plain model it came from writes
    plain = LocalGenerator(shared_copy(tiny_model()), model.tokenizer, name="plain")
    before = {name: tensor.clone() for name, tensor in plain.model.state_dict().items()}
    from memorag.generation.loader import _own_reader
    from memorag.runtime.placement import Placement

    own = _own_reader(plain, Placement.resolve("cpu"), {})
    assert own.memory_writer.model is plain.model and own.model is not plain.model
    assert all(torch.equal(before[name], tensor) for name, tensor in plain.model.state_dict().items())
    ids = torch.tensor([[2, 5, 9, 14, 3, 7, 11, 4]])
    assert not torch.allclose(logits(own.model, ids), logits(plain.model, ids), atol=1e-3)
