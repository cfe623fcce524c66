"""The causal mask aligned to the last key (a window after its memory), as the `sdpa` kernel runs it on CUDA.

On CUDA, the `sdpa` kernel gives SDPA torch's `causal_lower_right` instead of a boolean mask
(memory/attention.py). The CPU test checks that it is the same mask (every memory entry, then
causal within the window); the CUDA ones that the kernel it runs (flash attention in bf16) gives
the same outputs as the boolean mask without autograd (memorizing), and the same outputs and
gradients with it (training).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

from memorag.memory.attention import sdpa
from memorag.memory.schedule import full_mask


@pytest.mark.parametrize(("prefix", "tail"), [(0, 8), (4, 8), (256, 1024), (3, 5)])
def test_lower_right_causal_is_the_memory_then_causal_mask(prefix, tail):
    queries = tail
    ours = full_mask(queries, prefix, tail, None, torch.device("cpu"))  # [Tq, prefix + tail]
    assert torch.equal(causal_lower_right(queries, prefix + tail)._materialize(torch.device("cpu")), ours)


def _inputs(dtype, heads, kv_heads, queries, prefix, seed=0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    shape = lambda h, n: (2, h, n, 64)  # noqa: E731
    query = torch.randn(shape(heads, queries), generator=generator, device="cuda", dtype=dtype)
    key = torch.randn(shape(kv_heads, prefix + queries), generator=generator, device="cuda", dtype=dtype)
    value = torch.randn(shape(kv_heads, prefix + queries), generator=generator, device="cuda", dtype=dtype)
    return query, key, value


def _boolean_mask_attention(query, key, value, prefix: int, scale: float) -> torch.Tensor:
    mask = full_mask(query.shape[2], prefix, key.shape[2] - prefix, None, query.device)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale,
                                         enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (8, 2)])
def test_lower_right_kernel_equals_the_boolean_mask_on_cuda(dtype, heads, kv_heads):
    tolerance = 2e-2 if dtype == torch.bfloat16 else 2e-5
    inputs = _inputs(dtype, heads, kv_heads, queries=160, prefix=96)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        ours = sdpa(*inputs, 96, None, 0.125)
        reference = _boolean_mask_attention(*inputs, 96, 0.125)
    torch.testing.assert_close(ours, reference, atol=tolerance, rtol=tolerance)
    if dtype == torch.bfloat16:  # flash attention's kernel ran (the boolean mask's call never takes it)
        assert "aten::_flash_attention_forward" in {event.key for event in profile.key_averages()}

    leaves = [t.clone().requires_grad_(True) for t in inputs]
    again = [t.clone().requires_grad_(True) for t in inputs]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        ours = sdpa(*leaves, 96, None, 0.125)
    if dtype == torch.bfloat16:  # flash attention's kernel ran, not a mask
        assert "aten::_flash_attention_forward" in {event.key for event in profile.key_averages()}
    reference = _boolean_mask_attention(*again, 96, 0.125)
    torch.testing.assert_close(ours, reference, atol=tolerance, rtol=tolerance)
    grad_out = torch.randn_like(ours)
    (ours * grad_out).sum().backward()
    (reference * grad_out).sum().backward()
    for ours_grad, reference_grad in zip((t.grad for t in leaves), (t.grad for t in again), strict=True):
        torch.testing.assert_close(ours_grad, reference_grad, atol=5 * tolerance, rtol=5 * tolerance)
