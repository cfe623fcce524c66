"""Decoding steps keep their shapes: whole cache buffers with a bias, equal results (docs/memory-model.md,
"Decoding"). The CPU proxies of what a GPU pays per token: new (operator, shape) pairs and operators."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from memorag.memory.attention import KERNELS, KeysSeen
from memorag.memory.cache import CAPACITY_BUCKET
from memorag.memory.schedule import bucket_bias, window_mask

from .conftest import decode_tokens, random_ids, tiny_base, tiny_memory_model

# aten operators per decoded token of the tiny model below (transformers' static cache takes about 663);
# a change that adds per-token work fails here.
OPS_PER_TOKEN_BUDGET = 730


@pytest.mark.parametrize("scheme", ["full-coverage", "step-expansion", "segmentation"])
def test_the_bias_over_a_whole_buffer_is_the_window_mask_and_the_memory(scheme):
    prefix, rows_before, num_rows, capacity, ratio = 12, 9, 2, 40, 4
    bias = bucket_bias(scheme, ratio, prefix, rows_before, num_rows, capacity, torch.device("cpu"), torch.float32)
    seen = bias == 0  # [T, C]
    window = window_mask(scheme, ratio, rows_before, num_rows, torch.device("cpu"))
    if window is None:
        window = torch.ones(num_rows, rows_before + num_rows, dtype=torch.bool).tril(rows_before)
    end = prefix + rows_before + num_rows
    assert seen[:, :prefix].all()
    assert torch.equal(seen[:, prefix:end], window)
    assert not seen[:, end:].any()
    assert torch.isin(bias, torch.tensor([0.0, float("-inf")])).all()


@pytest.mark.parametrize("scheme", ["full-coverage", "step-expansion", "segmentation"])
def test_token_by_token_decoding_steps_equal_one_forward(scheme):
    model = tiny_memory_model("llama", window=16, ratios=[4], attention=scheme)
    ids = random_ids(53)  # three windows and a part, memory tokens inserted one token at a time
    with torch.no_grad():
        expected = model(ids, return_logits=True).logits
        cache = model.new_cache()
        hidden = model.read_tokens(ids[:, :20], cache, keep_hidden=True)
        hidden += decode_tokens(model, ids[:, 20:], cache)
        got = model.logits(torch.cat(hidden, 1)).float()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_decoding_never_reallocates_the_buffers_per_token():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    ids = random_ids(60)
    with torch.no_grad():
        cache = model.new_cache()
        model.read_tokens(ids[:, :10], cache)
        buffers = set()
        for index in range(10, ids.shape[1]):
            decode_tokens(model, ids[:, index : index + 1], cache)
            buffers.add(cache.keys[0].data_ptr())
            assert cache.keys[0].shape[2] % CAPACITY_BUCKET == 0
    assert len(buffers) == 1


def _pairs_and_ops(run) -> tuple[set[tuple[str, str]], int]:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        run()
    events = [event for event in prof.events() if event.name.startswith("aten::")]
    return {(event.name, str(event.input_shapes)) for event in events}, len(events)


def _per_token_cost(decode) -> tuple[int, float]:
    """(new (operator, input shapes) pairs, operators per token) that 32 more decoded tokens bring."""
    decode(8)  # warm-up: first-call allocations and lazy initialisations
    short, short_ops = _pairs_and_ops(lambda: decode(8))
    longer, longer_ops = _pairs_and_ops(lambda: decode(40))
    return len(longer - short), (longer_ops - short_ops) / 32


@pytest.mark.slow
def test_decoding_brings_no_more_new_shapes_than_transformers_static_cache():
    model = tiny_memory_model("llama", window=64, ratios=[4])
    memory = model.memorize(random_ids(256)[0].tolist())  # 64 entries
    prompt = random_ids(8, seed=1)[0].tolist()

    def decode_memory(n: int) -> None:
        model.generate_ids(prompt, memory=memory, max_new_tokens=n, min_new_tokens=n)

    base = tiny_base("llama")
    base_prompt = random_ids(memory.num_entries + len(prompt), seed=2)

    def decode_static(n: int) -> None:
        base.generate(base_prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                      cache_implementation="static", pad_token_id=0)

    memory_pairs, memory_ops = _per_token_cost(decode_memory)
    static_pairs, static_ops = _per_token_cost(decode_static)
    print(f"new pairs: memory {memory_pairs}, static {static_pairs}; ops/token: memory {memory_ops:.1f}, "
          f"static {static_ops:.1f}")
    assert memory_pairs <= static_pairs
    assert memory_ops <= OPS_PER_TOKEN_BUDGET


class _NoHostReads:
    """Makes every way of reading a tensor's value on the host raise while it is entered."""

    NAMES = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")

    def __enter__(self):
        self.saved = {name: getattr(torch.Tensor, name) for name in self.NAMES}

        def refuse(*args, **kwargs):
            raise AssertionError("a tensor's value was read on the host inside a decoding step")

        for name in self.NAMES:
            setattr(torch.Tensor, name, refuse)
        return self

    def __exit__(self, *exc):
        for name, method in self.saved.items():
            setattr(torch.Tensor, name, method)


def test_decoding_steps_read_no_tensor_value_on_the_host():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    ratio_of = model.ratio_function(4)
    with torch.no_grad():
        caches = [model.new_cache(), model.new_cache()]
        model.read_tokens_batch([random_ids(10), random_ids(13, seed=1)], caches, [ratio_of, ratio_of])
        for index in range(20):  # memory tokens inserted and windows compacted on the way
            tokens = [random_ids(1, seed=10 + index), random_ids(1, seed=40 + index)]
            with _NoHostReads():
                model.read_tokens_batch(tokens[:1], caches[:1], [ratio_of], kind="decode")
                model.read_tokens_batch(tokens, caches, [ratio_of, ratio_of], kind="decode")


def test_the_sdpa_dispatch_traces_with_dynamic_shapes():
    """The non-CPU branch of a decoding step's attention (meta tensors stand for a GPU's) traced with
    every dimension dynamic, as torch.compile does after a batch or capacity change: the head groups are
    the layer's constant, so SDPA never receives a SymBool (the failure CUDA showed)."""
    def attend(query, key, value, bias):  # the groups a constant, as a layer's `kv_groups` is
        return KERNELS["sdpa"](query, key, value, KeysSeen(bias=bias), 0.25, 3)

    compiled = torch.compile(attend, fullgraph=True, dynamic=True, backend="eager")
    for capacity in (128, 256):
        query = torch.empty(2, 6, 1, 16, device="meta")
        key = torch.empty(2, 2, capacity, 16, device="meta")
        bias = torch.empty(1, capacity, device="meta")
        assert compiled(query, key, key, bias).shape == (2, 1, 6, 16)
