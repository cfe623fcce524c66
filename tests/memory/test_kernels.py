"""The one kernel registry (memory/attention.py, `KERNELS`): window and decoding steps attend through
the same kernels with one signature, the keys a query sees given as a mask over valid rows or as a
bias over whole buffers (`KeysSeen`), grouped-query attention as the layer's head groups."""

from __future__ import annotations

import pytest
import torch

from memorag.memory.attention import KERNELS, KeysSeen
from memorag.memory.schedule import bucket_bias, full_mask, window_mask

from .conftest import random_ids, tiny_memory_model

HEADS, KV_HEADS, DIM = 4, 2, 8


def _qkv(queries: int, keys: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(2, HEADS, queries, DIM, generator=generator)
    key = torch.randn(2, KV_HEADS, keys, DIM, generator=generator)
    value = torch.randn(2, KV_HEADS, keys, DIM, generator=generator)
    return query, key, value


@pytest.mark.parametrize("scheme", ["full-coverage", "step-expansion", "segmentation"])
def test_every_kernel_attends_alike_over_valid_rows_and_over_buffers(scheme):
    """The same keys seen two ways: valid rows `[prefix | window]` with a mask, and buffers of capacity C
    whose rows past the valid ones are garbage, hidden by the bias. Every kernel gives one answer."""
    prefix, rows_before, rows, capacity = 6, 3, 2, 24
    query, key, value = _qkv(rows, capacity)
    valid = prefix + rows_before + rows
    mask = window_mask(scheme, 4, rows_before, rows, torch.device("cpu"))
    bias = bucket_bias(scheme, 4, prefix, rows_before, rows, capacity, torch.device("cpu"), torch.float32)
    reference = KERNELS["eager"](query, key[:, :, :valid], value[:, :, :valid], KeysSeen(prefix, mask), 0.3, 2)
    for name, kernel in KERNELS.items():
        over_rows = kernel(query, key[:, :, :valid], value[:, :, :valid], KeysSeen(prefix, mask), 0.3, 2)
        over_buffers = kernel(query, key, value, KeysSeen(bias=bias), 0.3, 2)
        torch.testing.assert_close(over_rows, reference, atol=1e-5, rtol=1e-5, msg=name)
        torch.testing.assert_close(over_buffers, reference, atol=1e-5, rtol=1e-5, msg=name)


def test_the_head_groups_are_the_kernels_grouped_query_attention():
    """Query head h reads key/value head h // groups, in every kernel."""
    query, key, value = _qkv(3, 7)
    seen = KeysSeen(prefix=4)
    expanded = key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1)
    for name, kernel in KERNELS.items():
        grouped = kernel(query, key, value, seen, 0.3, 2)
        plain = kernel(query, *expanded, seen, 0.3, 1)
        torch.testing.assert_close(grouped, plain, atol=1e-6, rtol=1e-6, msg=name)


def test_a_per_sequence_bias_is_each_sequences_own():
    query, key, value = _qkv(1, 10)
    device = torch.device("cpu")
    biases = [bucket_bias("full-coverage", 4, prefix, 0, 1, 10, device, torch.float32) for prefix in (3, 8)]
    together = KERNELS["sdpa"](query, key, value, KeysSeen(bias=torch.stack(biases)), 0.3, 2)
    for index, bias in enumerate(biases):
        alone = KERNELS["eager"](query[index : index + 1], key[index : index + 1], value[index : index + 1],
                                 KeysSeen(bias=bias), 0.3, 2)
        torch.testing.assert_close(together[index : index + 1], alone, atol=1e-5, rtol=1e-5)
    assert full_mask(1, 3, 0, None, device).all()


def test_the_layer_decides_grouped_query_attention_once():
    model = tiny_memory_model("qwen3")
    attentions = model.memory_attentions()
    assert {(attention.num_kv_heads, attention.kv_groups) for attention in attentions} == {(2, 2)}


@pytest.mark.parametrize("implementation", ["eager", "flash_attention_2"])
def test_a_decode_through_another_kernel_runs_decoding_steps_and_agrees_with_sdpa(implementation, monkeypatch):
    """Every kernel decodes through decoding steps over whole buffers (none turns a round into a window
    step), and its replies are SDPA's."""
    from memorag.memory import attention as attention_module

    calls = []
    real = attention_module.KERNELS[implementation]

    def counting(query, key, value, seen, scale, groups):
        calls.append(seen.bias is not None)
        return real(query, key, value, seen, scale, groups)

    ids = random_ids(40)[0].tolist()
    replies = {}
    for name in ("sdpa", implementation):
        model = tiny_memory_model("llama", attn_implementation=name)
        memory = model.memorize(ids, show_progress=False)
        if name == implementation:
            monkeypatch.setitem(attention_module.KERNELS, implementation, counting)
        replies[name] = model.generate_ids([5, 6, 7], memory=memory, max_new_tokens=6)
    assert replies[implementation] == replies["sdpa"]
    assert any(calls) and not all(calls)  # the prompt as window steps, then decoding steps over buffers
