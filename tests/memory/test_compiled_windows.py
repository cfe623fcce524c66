"""A window's layers compiled one by one (memory/compiled.py; docs/memory-model.md, "Compiled windows").

What a GPU needs from them, held on the CPU: every layer shares one set of graphs (their number does
not grow with the layers, nor with the windows read), the attention over the cache runs eager between
them, and the results are the eager layers'. Dynamo's `eager`-style backends run the captured graphs
op for op, so memorizing through them equals eager memorizing bit for bit, and AOTAutograd's
(`aot_eager`) gives the training loss and gradients; the inductor test (`pytest -m inductor`) and the
CUDA test (`pytest -m cuda`) check compiled kernels."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from .conftest import random_ids, tiny_memory_model

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class CountingBackend:
    """A dynamo backend that records each graph it is given and runs it as captured (a fake compiler)."""

    def __init__(self) -> None:
        self.graphs: list[int] = []  # nodes per graph, in the order compiled

    def __call__(self, graph_module, example_inputs):
        self.graphs.append(len(graph_module.graph.nodes))
        return graph_module.forward


def _memorize(model, ids: torch.Tensor):
    with torch.no_grad():
        return model.memorize(ids[0].tolist(), show_progress=False)


def _loss_and_grads(model, ids: torch.Tensor, autocast: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One training forward and backward over `ids` as its own labels: the loss and the memory parameters'
    gradients, flattened into one vector (under bf16 autocast on the `autocast` device type, if named)."""
    from contextlib import nullcontext

    model.zero_grad(set_to_none=True)
    with torch.autocast(autocast, dtype=torch.bfloat16) if autocast else nullcontext():
        output = model(ids, labels=ids)
    output.loss.backward()
    return output.loss.detach().float(), torch.cat([p.grad.flatten() for p in model.memory_parameters().values()])


@pytest.mark.parametrize("family", ["llama", "qwen3"])  # qwen3: norms on queries and keys too
def test_every_layer_and_window_shares_one_set_of_graphs_and_memorizes_bit_for_bit(family):
    counts = {}
    for layers in (2, 5):
        torch._dynamo.reset()
        model = tiny_memory_model(family, window=16, ratios=[4], base_overrides={"num_hidden_layers": layers})
        ids = random_ids(16 * 8)  # 8 whole windows
        expected = _memorize(model, ids)
        backend = CountingBackend()
        model.compile_windows(backend=backend)
        assert model.windows_compiled
        got = _memorize(model, ids)
        counts[layers] = len(backend.graphs)
        for a, b in zip([*expected.keys, *expected.values], [*got.keys, *got.values], strict=True):
            assert torch.equal(a, b)
        again = _memorize(model, random_ids(16 * 8, seed=1))  # another context: nothing new to compile
        assert again.num_entries == expected.num_entries
        assert len(backend.graphs) == counts[layers]
    # the same graphs for 2 layers as for 5: none is specific to a layer (no layer index, no weights, baked in)
    assert counts[2] == counts[5]
    # the attention between them is the one break in a layer (the decoder layer's own frame breaks around it too)
    assert counts[2] <= 4
    breaks = sum(count for reason, count in counters["graph_break"].items() if "ValidRowsStep.attend" in reason)
    assert breaks >= 1


@pytest.mark.parametrize("checkpointing", [True, False])  # the CPU recipe checkpoints each window, the GPU one not
def test_training_through_compiled_windows_gives_the_eager_loss_and_gradients(checkpointing):
    model = tiny_memory_model("qwen2", window=16, ratios=[4]).train()
    model.gradient_checkpointing = checkpointing
    ids = random_ids(16 * 4, batch=2)
    loss, grads = _loss_and_grads(model, ids)
    model.compile_windows(backend="aot_eager")  # AOTAutograd: the compiled graphs' own backward
    compiled_loss, compiled_grads = _loss_and_grads(model, ids)
    torch.testing.assert_close(compiled_loss, loss, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(compiled_grads, grads, rtol=1e-5, atol=1e-7)
    model.compile_windows(False)
    assert not model.windows_compiled


def test_decoding_steps_keep_their_own_path_under_compiled_windows():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    ids = random_ids(16 * 3)
    memory = _memorize(model, ids)
    prompt = random_ids(5, seed=2)[0].tolist()
    expected = model.generate_ids(prompt, memory, max_new_tokens=12, min_new_tokens=12)
    backend = CountingBackend()
    model.compile_windows(backend=backend)
    got = model.generate_ids(prompt, memory, max_new_tokens=12, min_new_tokens=12)
    assert got == expected
    graphs_after_prefill = len(backend.graphs)
    model.generate_ids(prompt, memory, max_new_tokens=24, min_new_tokens=24)  # more decoding steps, same prefill
    assert len(backend.graphs) == graphs_after_prefill  # decoding steps never entered the compiled layers


def test_cuda_graph_modes_are_refused_with_the_reason():
    model = tiny_memory_model("llama")
    with pytest.raises(ValueError, match="CUDA graphs"):
        model.compile_windows(mode="reduce-overhead")


@pytest.mark.inductor
def test_inductor_compiled_windows_match_the_eager_layers():
    model = tiny_memory_model("qwen2", window=16, ratios=[4])
    ids = random_ids(16 * 4)
    expected = _memorize(model, ids)
    model.compile_windows()
    got = _memorize(model, ids)
    for a, b in zip([*expected.keys, *expected.values], [*got.keys, *got.values], strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)


@pytest.mark.inductor
def test_inductor_compiled_windows_train_with_the_eager_loss_and_gradients():
    model = tiny_memory_model("qwen2", window=16, ratios=[4]).train()
    model.gradient_checkpointing = True
    ids = random_ids(16 * 4, batch=2)
    loss, grads = _loss_and_grads(model, ids)
    model.compile_windows()
    compiled_loss, compiled_grads = _loss_and_grads(model, ids)
    torch.testing.assert_close(compiled_loss, loss, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(compiled_grads, grads, rtol=1e-3, atol=1e-5)


def _largest_error(memory, reference) -> float:
    return max((got.float() - want.float()).abs().max().item() for got, want in zip(
        [*memory.keys, *memory.values], [*reference.keys, *reference.values], strict=True))


@pytest.mark.cuda
def test_compiled_windows_on_cuda_memorize_and_train_as_the_eager_layers():
    # bf16 rounds differently in fused kernels (an H200 run: 1 of 512 cache values 0.07 apart from eager bf16's),
    # so both bf16 memories are judged against the float32 one: compiled no further from it than eager, give or
    # take a bf16 step
    model = tiny_memory_model("qwen2", window=16, ratios=[4]).to("cuda")
    ids = random_ids(16 * 4, batch=2).to("cuda")
    reference = _memorize(model, ids[:1])
    model.to(torch.bfloat16)
    eager = _memorize(model, ids[:1])
    model.compile_windows()
    compiled = _memorize(model, ids[:1])
    assert _largest_error(compiled, reference) <= 2 * _largest_error(eager, reference) + 0.02

    for parameter in model.memory_parameters().values():  # training: fp32 memory parameters under autocast
        parameter.data = parameter.data.float()
    model.train()
    compiled_loss, compiled_grads = _loss_and_grads(model, ids, autocast="cuda")
    model.compile_windows(False)
    loss, grads = _loss_and_grads(model, ids, autocast="cuda")
    torch.testing.assert_close(compiled_loss, loss, rtol=0.02, atol=0.02)
    assert torch.nn.functional.cosine_similarity(compiled_grads, grads, dim=0) > 0.99
