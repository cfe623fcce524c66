"""Several prompts decoded as one batch through the compiled step (memory/decoding.py: `allocate_block`, `shared_round`).

Dynamo's `eager` backend traces the graph inductor would compile and runs it op for op (the
compiled step's own tests, test_compiled_step.py, use it too), so what these tests check is the
batched step itself: two graphs serve every round (one raw row per prompt; a raw row and a memory
row), nothing recompiles as the prompts reach their memory tokens and compact their windows each
at its own token, and each prompt's states and greedy tokens are those it has alone (a tiny fp32
model, where the shared matrix products round within 5e-5 of the lone ones and no two tokens tie).
"""

from __future__ import annotations

from unittest.mock import patch

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from memorag.memory.decoding import allocate_block, shared_round

from .conftest import decode_tokens, random_ids, tiny_memory_model

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _prompts() -> list[list[int]]:
    return [random_ids(5, seed=1)[0].tolist(), random_ids(9, seed=2)[0].tolist(), random_ids(14, seed=3)[0].tolist()]


@pytest.mark.parametrize("scheme", ["full-coverage", "segmentation"])
def test_three_prompts_decode_as_one_compiled_batch_with_the_tokens_each_has_alone(scheme):
    model = tiny_memory_model("llama", window=16, ratios=[4], attention=scheme)
    memory = model.memorize(random_ids(50)[0].tolist())
    prompts = _prompts()
    with torch.no_grad():
        alone = [model.generate_ids(prompt, memory, max_new_tokens=40, min_new_tokens=40) for prompt in prompts]
        model.compile_decoding(backend="eager")
        warm = model.generate_ids_batch(prompts, memory, max_new_tokens=4, min_new_tokens=4, exact=False)
        graphs = counters["stats"]["unique_graphs"]
        with torch._dynamo.config.patch(error_on_recompile=True):  # 40 rounds: memory tokens, compactions
            got = model.generate_ids_batch(prompts, memory, max_new_tokens=40, min_new_tokens=40, exact=False)
    assert graphs == counters["stats"]["unique_graphs"] == 2
    assert got == alone
    assert warm == [tokens[:4] for tokens in alone]


def test_prompts_that_read_nothing_in_a_round_leave_the_others_as_alone():
    """A finished prompt reads nothing: its placeholder rows must change no other prompt, nor itself."""
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(50)[0].tolist())
    prompts = [torch.tensor([ids]) for ids in _prompts()]
    tokens = random_ids(30, seed=4)  # [1, 30] read one at a time after the prompts
    # prompt 1 skips rounds 3-7 and 20-29 (as a finished prompt does); the others read every round
    reads = [[True] * 30, [not (3 <= r < 8 or r >= 20) for r in range(30)], [True] * 30]
    ratio = [model.ratio_function(memory.ratio)] * 3
    with torch.no_grad():
        expected, states_alone = [], []
        for ids, read in zip(prompts, reads, strict=True):
            cache = model.new_cache(memory, reserve=64)
            model.read_tokens(ids, cache)
            states = [decode_tokens(model, tokens[:, r : r + 1], cache)[0] for r in range(30) if read[r]]
            expected.append(torch.cat(states, dim=1))
            states_alone.append(cache.state)
        model.compile_decoding(backend="eager")
        block = allocate_block(model, memory, 3, 14 + 30)
        caches = block.caches
        model.read_tokens_batch(prompts, caches, ratio, exact=False)
        got = [[], [], []]
        for r in range(30):
            fed = [tokens[:, r : r + 1] if read[r] else tokens[:, :0] for read in reads]
            last = shared_round(model, block, fed, ratio)
            for index, state in enumerate(last):
                if state is not None:
                    got[index].append(state[:, None])
    assert counters["stats"]["unique_graphs"] == 2
    for index in range(3):
        torch.testing.assert_close(torch.cat(got[index], dim=1), expected[index], atol=5e-5, rtol=1e-4)
        assert caches[index].state == states_alone[index]


def test_a_cache_of_the_block_never_grows_out_of_it():
    """A block is allocated once for the whole decode: a cache that needs more rows is an error that says
    so, at the write that needs them (its rows would otherwise leave the block the round attends over)."""
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(50)[0].tolist())
    block = allocate_block(model, memory, 2, 8)
    with torch.no_grad(), pytest.raises(RuntimeError, match="allocate the block with more rows"):
        block.caches[1].ensure_capacity(block.capacity + 1)
    assert block.caches[1].keys[0].data_ptr() == block.keys[0][1].data_ptr()  # still a row of the block


def test_a_batch_decodes_as_decode_chooses_with_compiled_decoding_on_or_off():
    """A shared batch is one block of caches whether decoding is compiled or not; an exact batch packs its
    prompts' rows eagerly, or with compiled decoding goes through the compiled step one prompt after another;
    the replies of an exact batch are those each prompt has alone."""
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(50)[0].tolist())
    prompts = _prompts()
    tokens = dict(max_new_tokens=12, min_new_tokens=12)
    rounds: dict[str, list[int]] = {}
    now = {"label": "alone"}
    original = model.step

    def step(inputs, *args, **kwargs):
        rounds.setdefault(now["label"], []).append(len(inputs))
        return original(inputs, *args, **kwargs)

    model.step = step
    with torch.no_grad():
        alone = [model.generate_ids(prompt, memory, **tokens) for prompt in prompts]
        for label in ("eager", "compiled"):
            now["label"] = label
            if label == "compiled":
                model.compile_decoding(backend="eager")
            assert model.generate_ids_batch(prompts, memory, **tokens) == alone
            with patch("memorag.memory.decoding.shared_round", wraps=shared_round) as shared:
                model.generate_ids_batch(prompts, memory, exact=False, **tokens)
            assert shared.call_count == 11  # every round after the prompts' is one shared round
    assert rounds["eager"] == [3] * 12 + [3]  # exact: 12 packed steps; shared: its prompts in one step
    # compiled: each prompt alone, its prompt then 11 rounds through the compiled step; shared as eager
    assert rounds["compiled"] == [1] * 36 + [3]
