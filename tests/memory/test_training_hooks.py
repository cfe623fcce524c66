"""Only memory parameters train, and gradients cross windows through the memory."""

import torch

from .conftest import random_ids, tiny_memory_model


def test_only_memory_parameters_require_grad(family):
    model = tiny_memory_model(family, memory_params="qkvo")
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    declared = {id(p) for p in model.memory_parameters().values()}
    assert trainable == declared
    # the embedding, then per layer 4 projection weights (+ q/k/v biases for qwen2)
    per_layer = 7 if family == "qwen2" else 4
    assert len(declared) == 1 + 2 * per_layer


def test_an_optimizer_step_leaves_the_base_bit_identical():
    model = tiny_memory_model("qwen3").train()
    base_before = {name: p.detach().clone() for name, p in model.base_model.named_parameters()
                   if not p.requires_grad}
    memory_before = {name: p.detach().clone() for name, p in model.memory_parameters().items()}
    optimizer = torch.optim.AdamW(model.memory_parameters().values(), lr=1e-2)
    ids = random_ids(48)
    model(ids, labels=ids).loss.backward()
    optimizer.step()
    for name, param in model.base_model.named_parameters():
        if not param.requires_grad:
            assert torch.equal(param, base_before[name]), name
    assert any(not torch.equal(p, memory_before[n]) for n, p in model.memory_parameters().items())


def test_loss_of_window_three_reaches_window_one_memory():
    model = tiny_memory_model("llama", window=16)
    ids = random_ids(48)
    cache = model.new_cache(functional=True)
    model.read_tokens(ids[:, :16], cache)  # window 1, compacted into memory
    first_window_memory = [k for k in cache.keys]
    model.read_tokens(ids[:, 16:32], cache)
    hidden = model.read_tokens(ids[:, 32:48], cache, keep_hidden=True)[0]
    logits = model.lm_head(model.final_norm(hidden)).float()
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], ids[0, 33:])
    grads = torch.autograd.grad(loss, [*first_window_memory, model.memory_parameters()["layers.0.q.weight"]])
    assert all(g.abs().sum() > 0 for g in grads[:-1])
    assert grads[-1].abs().sum() > 0  # window 1's memory-token queries matter to window 3


def test_detaching_window_one_memory_changes_the_gradient():
    model = tiny_memory_model("llama", window=16)
    ids = random_ids(48)
    labels = ids.clone()
    labels[:, :33] = -100  # loss on window 3 only

    def gradient(detach: bool):
        model.zero_grad()
        cache = model.new_cache(functional=True)
        model.read_tokens(ids[:, :16], cache)
        if detach:
            cache.keys = [k.detach() for k in cache.keys]
            cache.values = [v.detach() for v in cache.values]
        hidden = torch.cat(model.read_tokens(ids[:, 16:48], cache, keep_hidden=True), 1)
        targets = torch.cat([labels[:, 17:], labels.new_full((1, 1), -100)], 1)
        loss, _ = model.score_labelled(hidden, targets)
        (loss / int((targets != -100).sum())).backward()
        return model.memory_parameters()["layers.0.k.weight"].grad.clone()

    assert (gradient(False) - gradient(True)).abs().max() > 1e-6


def test_gradient_checkpointing_gives_the_same_loss_and_gradients():
    ids = random_ids(56, batch=2)
    results = []
    for checkpointing in (False, True):
        model = tiny_memory_model("qwen2", ratios=[2, 4], ratio_mix="step-random").train()
        model.gradient_checkpointing = checkpointing
        output = model(ids, labels=ids)
        output.loss.backward()
        grads = {n: p.grad.clone() for n, p in model.memory_parameters().items() if p.grad is not None}
        results.append((output.loss.detach(), grads))
    torch.testing.assert_close(results[0][0], results[1][0])
    assert results[0][1].keys() == results[1][1].keys() == set(model.memory_parameters())
    # memory tokens' last-layer outputs are never read (only their keys and values are),
    # so the last layer's memory query projection is the one parameter whose gradient is zero
    zero = {name for name, grad in results[0][1].items() if not grad.any()}
    assert zero == {"layers.1.q.weight", "layers.1.q.bias"}
    for name in results[0][1]:
        torch.testing.assert_close(results[0][1][name], results[1][1][name], atol=1e-6, rtol=1e-5)


def test_loss_counts_raw_tokens_only():
    model = tiny_memory_model("llama", window=16)
    ids = random_ids(40)
    output = model(ids, labels=ids)
    assert output.num_loss_tokens == 39  # every raw token but the last predicts the next one


def test_memory_projections_of_a_quantized_base_are_plain_trainable_linears():
    """A FAKE quantized projection (an nn.Linear subclass, as bitsandbytes' layers are) is copied
    as a plain nn.Linear with the same weights."""
    from memorag.memory.attention import trainable_copy

    class FakeQuantizedLinear(torch.nn.Linear):
        pass

    fake = FakeQuantizedLinear(8, 4, bias=True)
    copy = trainable_copy(fake)
    assert type(copy) is torch.nn.Linear and copy.weight.requires_grad
    assert torch.equal(copy.weight, fake.weight) and torch.equal(copy.bias, fake.bias)
    assert copy.weight.data_ptr() != fake.weight.data_ptr()
