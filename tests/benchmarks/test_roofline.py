"""The roofline's FLOP count equals the work memorize really does (counted call by call)."""

from __future__ import annotations

import pytest
import torch

import memorag.memory.attention as attention_module
from memorag.benchmarking.roofline import Shape, memorize_flops, memorize_scores
from tests.memory.conftest import random_ids, tiny_memory_model


def _count_linear_flops(model) -> tuple[list[int], list]:
    total = [0]

    def hook(module, inputs, output):
        rows = inputs[0].numel() // inputs[0].shape[-1]
        total[0] += 2 * rows * module.in_features * module.out_features

    handles = [module.register_forward_hook(hook) for module in model.layers.modules()
               if isinstance(module, torch.nn.Linear)]
    return total, handles


@pytest.mark.parametrize("ratio", [2, 4, 8])
def test_flops_match_the_calls_memorize_makes(monkeypatch, ratio):
    window, windows = 16, 5
    model = tiny_memory_model(window=window, ratios=[ratio])
    scores = [0]
    real_attend = attention_module.KERNELS["sdpa"]

    def counting_attend(query, key, value, seen, scale, groups):
        prefix, mask = seen.prefix, seen.mask
        queries, tail = query.shape[2], key.shape[2] - prefix
        causal = mask is None and tail == queries
        scores[0] += queries * prefix + (queries * (queries + 1) // 2 if causal else queries * tail)
        return real_attend(query, key, value, seen, scale, groups)

    monkeypatch.setitem(attention_module.KERNELS, "sdpa", counting_attend)
    linear, handles = _count_linear_flops(model)
    with torch.no_grad():
        memory = model.memorize(random_ids(window * windows)[0].tolist(), show_progress=False)
    for handle in handles:
        handle.remove()

    shape = Shape.of(model.base_model.config)
    expected = memorize_flops(window * windows, window, ratio, shape)
    per_layer_scores, memory_rows = memorize_scores(window * windows, window, ratio)
    assert memory.num_entries == memory_rows
    assert scores[0] == per_layer_scores * shape.layers
    assert linear[0] == expected["linear"]


def test_partial_windows_are_refused():
    with pytest.raises(ValueError, match="whole number of windows"):
        memorize_scores(100, 16, 4)
