"""Parity with plain transformers: inside one window the memory model is the base model reading
the context with a memory token after every ratio-th token, each at its own position."""

import pytest
import torch

from .conftest import random_ids, tiny_base, tiny_memory_model


@pytest.mark.parametrize("length, ratio", [(9, 4), (16, 4), (15, 2), (16, 16)])
def test_one_window_equals_plain_transformers_reading_the_interleaved_sequence(family, length, ratio):
    """Untrained memory parameters are copies of the base ones and the memory embedding is the
    eos token's, so a window reads exactly like the base model given eos after every ratio-th token."""
    model = tiny_memory_model(family, window=16, ratios=[ratio])
    base = tiny_base(family)  # the same seed: the same weights, unpatched
    with torch.no_grad():
        for param in model.memory_parameters().values():  # undo the test perturbation
            param.zero_()
        for attention in model.memory_attentions():
            for short, projection in attention.memory.items():
                source = getattr(attention.base_layer, f"{short}_proj")
                projection.load_state_dict(source.state_dict())
        model.memory_embedding.copy_(model.embed_tokens.weight[1])  # eos_token_id=1
    ids = random_ids(length, batch=2)
    interleaved, raw_rows = [], []
    for index in range(length):
        raw_rows.append(len(interleaved))
        interleaved.append(ids[:, index : index + 1])
        if (index + 1) % ratio == 0:
            interleaved.append(torch.ones_like(ids[:, :1]))
    with torch.no_grad():
        expected = base(torch.cat(interleaved, 1)).logits[:, raw_rows]
        got = model(ids, return_logits=True).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_patching_leaves_the_plain_forward_unchanged(family):
    ids = random_ids(24)
    with torch.no_grad():
        reference = tiny_base(family)(ids).logits
        patched = tiny_memory_model(family).base_model(ids).logits
    torch.testing.assert_close(patched, reference, atol=0, rtol=0)


@pytest.mark.parametrize("attention", ["full-coverage", "step-expansion", "segmentation"])
def test_sdpa_and_eager_agree(attention):
    ids = random_ids(70)
    outputs = []
    for implementation in ("sdpa", "eager"):
        model = tiny_memory_model("qwen3", attention=attention, attn_implementation=implementation)
        with torch.no_grad():
            outputs.append(model(ids, return_logits=True).logits)
    torch.testing.assert_close(outputs[0], outputs[1], atol=1e-5, rtol=1e-5)


def test_memory_changes_what_later_windows_read():
    """Beyond one window the memory is used: logits differ from the window alone."""
    model = tiny_memory_model("llama")
    ids = random_ids(40)
    with torch.no_grad():
        with_memory = model(ids, return_logits=True).logits[:, 32:]
        window_alone = model.base_model(ids[:, 32:]).logits
    assert (with_memory - window_alone).abs().max() > 1e-3


def test_fp32_memory_parameters_beside_a_bf16_base():
    """Mixed precision (fp32 memory weights, bf16 frozen base) reads and generates."""
    model = tiny_memory_model("llama")
    model.base_model.to(torch.bfloat16)
    assert model.dtype == torch.float32 and model.base_dtype == torch.bfloat16
    ids = random_ids(50)
    with torch.no_grad():
        logits = model(ids, return_logits=True).logits
    assert torch.isfinite(logits).all()
    memory = model.memorize(ids[0].tolist())
    assert memory.keys[0].dtype == torch.bfloat16
    assert len(model.generate_ids([3, 4], memory=memory, max_new_tokens=3)) <= 3
