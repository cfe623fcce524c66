"""The decoding step compiles whole and replays (memory/compiled.py; docs/memory-model.md, "Decoding").

The CPU proxies of what a GPU needs to replay a step as a CUDA graph: the layers' forward over a
decoding step is one graph (`fullgraph=True`: a graph break raises), two graphs serve a whole decode
(a step of one raw row, a step that also brings a memory row) across memory-token insertions, window
compactions and buffer growth, and nothing recompiles over 64 steps. Dynamo's own `eager` backend
traces exactly what inductor would compile and runs it op for op, so its results equal the eager
step's bit for bit; the inductor test (`pytest -m inductor`) checks the compiled kernels."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from .conftest import decode_tokens, random_ids, tiny_memory_model

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _decode_token_by_token(model, ids: torch.Tensor, start: int, reserve: int, after_warmup=None) -> torch.Tensor:
    """Feed `ids[:, :start]` as window steps, then one token at a time as decoding steps; the raw rows'
    hidden states [1, N - start, D]."""
    cache = model.new_cache(reserve=reserve)
    model.read_tokens(ids[:, :start], cache)
    hidden = []
    for index in range(start, ids.shape[1]):
        if index == start + 8 and after_warmup is not None:
            after_warmup()
        hidden += decode_tokens(model, ids[:, index : index + 1], cache)
    return torch.cat(hidden, dim=1)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["full-coverage", "segmentation"])
def test_the_decoding_step_compiles_whole_and_replays_64_steps_without_recompiling(scheme):
    model = tiny_memory_model("llama", window=16, ratios=[4], attention=scheme)
    ids = random_ids(10 + 72)  # 72 steps: 18 memory tokens inserted, 4 windows compacted
    with torch.no_grad():
        expected = _decode_token_by_token(model, ids, 10, reserve=128)
        model.compile_decoding(backend="eager")
        graphs_after_warmup = []
        with ExitStack() as stack:

            def refuse_recompiling() -> None:  # both graphs exist after 8 steps; from here on a new one fails
                graphs_after_warmup.append(counters["stats"]["unique_graphs"])
                stack.enter_context(torch._dynamo.config.patch(error_on_recompile=True))

            got = _decode_token_by_token(model, ids, 10, reserve=128, after_warmup=refuse_recompiling)
    assert graphs_after_warmup == [2]  # one raw row; a raw row and a memory row
    assert counters["stats"]["unique_graphs"] == 2  # and nothing more over the 64 steps after
    assert torch.equal(got, expected)


@pytest.mark.slow
def test_one_compiled_step_serves_every_buffer_capacity():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    ids = random_ids(40)
    with torch.no_grad():
        model.compile_decoding(backend="eager")
        for reserve in (100, 300, 700):  # buffers of 128, 384 and 768 rows
            _decode_token_by_token(model, ids, 10, reserve=reserve)
    assert counters["stats"]["unique_graphs"] == 2


def test_generate_through_the_compiled_step_gives_the_eager_tokens():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(50)[0].tolist())
    prompts = [random_ids(5, seed=1)[0].tolist(), random_ids(9, seed=2)[0].tolist()]
    with torch.no_grad():
        expected = model.generate_ids(prompts[0], memory, max_new_tokens=30, min_new_tokens=30)
        expected_batch = model.generate_ids_batch(prompts, memory, max_new_tokens=20, min_new_tokens=20)
        model.compile_decoding(backend="eager")
        got = model.generate_ids(prompts[0], memory, max_new_tokens=30, min_new_tokens=30)
        got_batch = model.generate_ids_batch(prompts, memory, max_new_tokens=20, min_new_tokens=20)
        model.compile_decoding(False)
        again = model.generate_ids(prompts[0], memory, max_new_tokens=30, min_new_tokens=30)
    assert counters["stats"]["unique_graphs"] == 2
    assert got == expected == again
    assert got_batch == expected_batch


@pytest.mark.inductor
def test_the_inductor_compiled_step_matches_the_eager_step():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    ids = random_ids(10 + 40)
    with torch.no_grad():
        expected = _decode_token_by_token(model, ids, 10, reserve=128)
        model.compile_decoding()
        got = _decode_token_by_token(model, ids, 10, reserve=128)
    assert counters["stats"]["unique_graphs"] == 2
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_the_compiled_step_on_cuda_matches_the_eager_step(mode):
    model = tiny_memory_model("llama", window=16, ratios=[4]).to("cuda")
    ids = random_ids(10 + 72).to("cuda")
    with torch.no_grad():
        expected = _decode_token_by_token(model, ids, 10, reserve=128)
        model.compile_decoding(mode=mode)
        got = _decode_token_by_token(model, ids, 10, reserve=128)
    assert counters["stats"]["unique_graphs"] == 2
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
