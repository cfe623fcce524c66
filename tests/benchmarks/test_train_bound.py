"""The training bound's FLOP count equals the work a training step really does (counted call by call)."""

from __future__ import annotations

import pytest
import torch

import memorag.memory.attention as attention_module
from benchmarks.train import train_step_flops
from memorag.benchmarking.roofline import Shape
from memorag.memory.lowrank import apply_lowrank
from tests.memory.conftest import VOCAB, random_ids, tiny_base, tiny_memory_model


class _CountBackward(torch.autograd.Function):
    """Identity whose backward adds the attention call's scores to a counter."""

    @staticmethod
    def forward(ctx, output, scores, counter):
        ctx.scores, ctx.counter = scores, counter
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad):
        ctx.counter[0] += ctx.scores
        return grad, None, None


def count_a_training_step(model, ids, monkeypatch) -> dict[str, int]:
    counts = {"forward_linear": 0, "input_gradients": 0, "weight_gradients": 0, "forward_scores": 0}
    backward_scores = [0]
    real_attend = attention_module.KERNELS["sdpa"]

    def counting_attend(query, key, value, seen, scale, groups):
        prefix, mask = seen.prefix, seen.mask
        queries, tail = query.shape[2], key.shape[2] - prefix
        causal = mask is None and tail == queries
        scores = query.shape[0] * (queries * prefix + (queries * (queries + 1) // 2 if causal else queries * tail))
        counts["forward_scores"] += scores
        out = real_attend(query, key, value, seen, scale, groups)
        return _CountBackward.apply(out, scores, backward_scores) if torch.is_grad_enabled() else out

    monkeypatch.setitem(attention_module.KERNELS, "sdpa", counting_attend)

    def forward_hook(module, inputs, output):
        counts["forward_linear"] += 2 * (inputs[0].numel() // module.in_features) * module.in_features * module.out_features

    def backward_hook(module, grad_input, grad_output):
        flops = 2 * (grad_output[0].numel() // module.out_features) * module.in_features * module.out_features
        if grad_input[0] is not None:
            counts["input_gradients"] += flops
        if module.weight.requires_grad:
            counts["weight_gradients"] += flops

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    handles = [m.register_forward_hook(forward_hook) for m in linears]
    handles += [m.register_full_backward_hook(backward_hook) for m in linears]
    model.train()
    output = model(ids, labels=ids)
    output.loss.backward()
    for handle in handles:
        handle.remove()
    counts["backward_scores"] = backward_scores[0]
    return counts


@pytest.mark.parametrize("ratio,rank,checkpointing", [(4, 0, True), (2, 0, False), (8, 3, True)])
def test_flops_match_the_calls_a_training_step_makes(monkeypatch, ratio, rank, checkpointing):
    window, windows, batch = 16, 4, 2
    model = tiny_memory_model(window=window, ratios=[ratio])
    if rank:  # low-rank factors start from untrained copies
        model = apply_lowrank(type(model)(tiny_base(), model.config), rank)
        with torch.no_grad():
            for param in model.memory_parameters().values():
                param.add_(0.01)
    model.gradient_checkpointing = checkpointing
    ids = random_ids(window * windows, batch=batch)
    counts = count_a_training_step(model, ids, monkeypatch)

    shape = Shape.of(model.base_model.config)
    flops = train_step_flops(window * windows, window, ratio, shape, batch, VOCAB, memory_rank=rank,
                             checkpointing=checkpointing)
    passes = 2 if checkpointing else 1
    assert counts["forward_linear"] == passes * (flops["forward_linear"] + flops["logits"])
    # input gradients: every linear on every row (the logits' included), none for a frozen weight
    assert counts["input_gradients"] == flops["backward_linear"]
    assert counts["weight_gradients"] == flops["weight_gradients"]
    per_score = shape.flops_per_score()
    assert counts["forward_scores"] * per_score == passes * flops["forward_attention"]
    assert 2 * counts["backward_scores"] * per_score == flops["backward_attention"]
    recompute = flops["recompute"]
    assert flops["linear"] + flops["attention"] == pytest.approx(
        counts["forward_linear"] + counts["input_gradients"] + counts["weight_gradients"]
        + (counts["forward_scores"] + 2 * counts["backward_scores"]) * per_score)
    assert (recompute > 0) == checkpointing


def test_sft_bound_counts_logits_of_labelled_rows_only():
    full = train_step_flops(1024, 256, 4)
    sft = train_step_flops(1024, 256, 4, logit_rows=64)
    assert full["linear"] - sft["linear"] == pytest.approx(3 * 2 * 576 * 49152 * (1023 - 64))  # fwd, recompute, bwd


def test_time_steps_trains_the_memory_parameters():
    from benchmarks.train import time_steps

    model = tiny_memory_model(window=16, ratios=[4])
    model.gradient_checkpointing = True
    ids = random_ids(32)
    before = model.memory_embedding.detach().clone()
    result = time_steps(model.train(), ids, ids.clone(), "fp32", steps=2, warmup=0)
    assert len(result["all_seconds"]) == 2 and result["seconds"] > 0
    assert not torch.equal(before, model.memory_embedding.detach())
