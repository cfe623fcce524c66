"""The memory model's decoding: gpt-fast's prefill and decode step over explicit caches, driven by the one
loop (memorag/runtime/decode_loop.py; docs/memory-model.md, "Decoding").

`prefill(model, caches, token_ids, ratio_of, plan)` reads prompts into their working caches (window
steps) and `decode_step(model, caches, tokens, ratio_of, plan)` reads one token per sequence (decoding
steps); both return the next-token logits [n, V]. Each sequence's cache and ratio function are
arguments, and so is the batch plan:

- `"alone"`: each sequence in a step of its own (the compiled decoding step runs one sequence's shapes);
- `"exact"`: one step of packed rows, each sequence attending over its own cache and its linear layers
  rounding as alone (`MemoryCore.read_tokens_batch`, `PackedStepRows`): replies equal one-by-one decoding;
- `"shared"`: the same packed step with the matrix products shared (a token can differ where two tie).

With a `CacheBlock` the caches are rows of one buffer per layer and a round is one `WholeBufferStep`
over all of them (`shared_round`), the products shared, compiled or eager alike. `MemoryRows` holds a
running batch's caches for the loop (the server's prompts over different memories, or one call's
prompts over one memory); `decode` is what `MemoryModel.generate_ids_batch` calls: it alone chooses
the plan, and turns the public options into the loop's `Sampling`, `Stops` and `Request`s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch

from memorag.runtime.decode_loop import DecodeBatch, Request, Sampling, Stops
from memorag.runtime.stop_tokens import stop_token_ids

from .attention import KeysSeen
from .cache import CacheBlock, MemoryCache, WholeBufferStep, bucketed
from .core import MemoryCore, StepInput, plan_steps
from .schedule import RatioOf, ScheduleState, bucket_bias, raw_then_memory, self_only_bias
from .state import Memory

logger = logging.getLogger(__name__)

BatchPlan = Literal["alone", "exact", "shared"]

# The options of `MemoryModel.generate_ids` besides its named ones; anything else is refused by name.
OPTIONS = ("top_k", "repetition_penalty", "min_new_tokens", "stop_strings", "streamer", "logits_processor",
           "stopping_criteria")
# Options that watch one sequence: transformers' protocols index a batch's rows, which a loop that
# sequences join and leave does not keep.
ONE_SEQUENCE = ("logits_processor", "stopping_criteria")


def prefill(model: MemoryCore, caches: Sequence[MemoryCache], token_ids: Sequence[torch.Tensor],
            ratio_of: Sequence[RatioOf], plan: BatchPlan) -> torch.Tensor:
    """Read each prompt `token_ids[i]` [1, n_i] into `caches[i]` as window steps; the logits of each one's
    last row [n, V]."""
    return _read(model, caches, token_ids, ratio_of, plan, "window")


def decode_step(model: MemoryCore, caches: Sequence[MemoryCache], tokens: Sequence[int],
                ratio_of: Sequence[RatioOf], plan: BatchPlan) -> torch.Tensor:
    """Read `tokens[i]` into `caches[i]` as a decoding step (every sequence in one step, or each alone);
    the next-token logits [n, V]."""
    ids = [torch.tensor([[token]], dtype=torch.long, device=model.device) for token in tokens]
    return _read(model, caches, ids, ratio_of, plan, "decode")


def _read(model: MemoryCore, caches: Sequence[MemoryCache], token_ids: Sequence[torch.Tensor],
          ratio_of: Sequence[RatioOf], plan: BatchPlan, kind: str) -> torch.Tensor:
    """`token_ids[i]` read into `caches[i]` as `kind` steps, under `plan`; the next-token logits [n, V]."""
    if plan == "alone":
        last = [model.read_tokens_batch([ids], [cache], [ratio], kind)[0]
                for ids, cache, ratio in zip(token_ids, caches, ratio_of, strict=True)]
    else:
        last = model.read_tokens_batch(token_ids, caches, ratio_of, kind, exact=plan == "exact")
    return next_token_logits(model, last, plan)


def next_token_logits(model: MemoryCore, last: Sequence[torch.Tensor | None], plan: BatchPlan) -> torch.Tensor:
    """The logits [n, V] of the sequences' last raw rows ([1, D] each; None: read nothing, left out): each
    row's head product as alone, or one product over all rows where the plan shares them."""
    hidden = [states for states in last if states is not None]
    if plan != "shared" or len(hidden) == 1:
        return torch.cat(model.logits_alone(hidden))
    return model.logits(torch.cat(hidden))


class MemoryRows:
    """The memory model's rows for the loop (`DecodeRows`): each a prompt (its ids, and the memory it
    continues or None) in a working cache of its own, so prompts over different memories share a batch;
    with `block`, the caches are the block's rows, taken in the order the prompts join."""

    def __init__(self, model: MemoryCore, plan: BatchPlan = "shared", block: CacheBlock | None = None):
        self.model, self.plan, self.block = model, plan, block
        self.caches: list[MemoryCache] = []
        self.ratios: list[RatioOf] = []

    def prompt_ids(self, prompt: tuple[Sequence[int], Memory | None]) -> Sequence[int]:
        return prompt[0]

    @torch.inference_mode()
    def prefill(self, prompts: Sequence[tuple[Sequence[int], Memory | None]], max_new_tokens: Sequence[int]
                ) -> torch.Tensor:
        model, caches, ratios, token_ids = self.model, [], [], []
        for (ids, memory), budget in zip(prompts, max_new_tokens, strict=True):
            if not ids:
                raise ValueError("the prompt is empty")
            ratios.append(model.ratio_function(memory.ratio if memory is not None else model.choose_ratio(len(ids))))
            caches.append(self._new_cache(memory, len(ids) + budget, len(self.caches) + len(caches)))
            token_ids.append(torch.tensor([list(ids)], dtype=torch.long, device=model.device))
        logits = prefill(model, caches, token_ids, ratios, self.plan)
        self.caches += caches
        self.ratios += ratios
        return logits

    def _new_cache(self, memory: Memory | None, reserve: int, index: int) -> MemoryCache:
        if self.block is None:
            return self.model.new_cache(memory, reserve=reserve)
        if index >= len(self.block.caches):
            raise ValueError(f"the decoding block holds {len(self.block.caches)} prompts; allocate it for more")
        return self.block.caches[index]

    def remove(self, index: int) -> None:
        self.caches.pop(index)
        self.ratios.pop(index)

    @torch.inference_mode()
    def decode_step(self, tokens: list[int]) -> torch.Tensor:
        if self.block is None:
            return decode_step(self.model, self.caches, tokens, self.ratios, self.plan)
        by_cache = {id(cache): (token, ratio) for cache, token, ratio in zip(self.caches, tokens, self.ratios,
                                                                             strict=True)}
        empty = torch.zeros(1, 0, dtype=torch.long, device=self.model.device)
        token_ids = [torch.tensor([[by_cache[id(cache)][0]]], dtype=torch.long, device=self.model.device)
                     if id(cache) in by_cache else empty for cache in self.block.caches]
        ratio_of = [by_cache[id(cache)][1] if id(cache) in by_cache else self.ratios[0] for cache in self.block.caches]
        return next_token_logits(self.model, shared_round(self.model, self.block, token_ids, ratio_of), "shared")


def allocate_block(model: MemoryCore, memory: Memory | None, num_prompts: int, new_tokens: int) -> CacheBlock:
    """Caches for `num_prompts` prompts continuing `memory` (or from nothing) as rows of one block, with room
    for `new_tokens` raw tokens each (its prompt and its reply) and the memory tokens among them."""
    if memory is not None:
        model.check_memory(memory)
        state, first = memory.state, (memory.keys, memory.values)
        kv_heads, head_dim, dtype = memory.keys[0].shape[1], memory.keys[0].shape[3], memory.keys[0].dtype
    else:
        attention = model.memory_attentions()[0]
        state, first = ScheduleState(), None
        kv_heads, head_dim, dtype = attention.num_kv_heads, attention.head_dim, model.base_dtype
    # every raw token may bring a memory token (ratio 1), and a round writes two rows past the last one
    capacity = bucketed(state.cache_length + 2 * new_tokens + 2)
    return CacheBlock.allocate(num_prompts, (kv_heads, capacity, head_dim), model.rotate, len(model.layers), dtype,
                               model.device, state, first)


def shared_round(model: MemoryCore, block: CacheBlock, token_ids: Sequence[torch.Tensor],
                 ratio_of: Sequence[Callable[[int], int]]) -> list[torch.Tensor | None]:
    """One decoding round of the prompts whose caches are `block`'s rows, one step over all of them:
    each prompt reads its one token (`token_ids[i]` [1, 1], or [1, 0] once finished), with its own positions,
    buffer rows and bias. Returns each prompt's raw row's last hidden state [1, D], None where it read nothing.

    T, the rows per prompt, is 2 when any prompt brings a memory token this round, else 1. A prompt whose
    piece has one row fewer (or that reads nothing: it has finished) fills the round with placeholder rows:
    written past its cache's length (never committed, overwritten by its next real row), each seeing what its
    raw row sees and itself (so every row's softmax has a key), its output ignored. Row 1, when T is 2, is
    always projected as a memory row. Every shape is the same round after round (P, T in {1, 2}, C), so the
    compiled step is two graphs. Each linear layer sees the P prompts' rows together (shared products)."""
    items: dict[int, StepInput] = {}
    for index, (ids, cache, ratio) in enumerate(zip(token_ids, block.caches, ratio_of, strict=True)):
        steps = plan_steps(ids, cache, model.config.window, ratio)
        if len(steps) > 1 or any(step.piece.num_raw != 1 for step in steps):
            raise ValueError("a round of the shared batch reads one token per prompt")
        if steps:
            items[index] = steps[0]
    rows = 2 if any(item.piece.num_memory for item in items.values()) else 1
    ids, written, biases = zip(*(_round_rows(model, block, cache, items.get(index), rows)
                                 for index, cache in enumerate(block.caches)), strict=True)
    device = model.device
    hidden = model.embed_tokens(torch.stack([torch.as_tensor(token, device=device) for token in ids])[:, None])
    split = None
    if rows == 2:
        split = raw_then_memory(torch.device(device))
        hidden = model.with_memory_rows(hidden, split)  # [P, 2, D]
    positions = torch.tensor(written, device=device)  # [P, T]: buffer rows are positions (rotated keys)
    context = WholeBufferStep(block.keys, block.values, positions, KeysSeen(bias=torch.stack(biases)), split,
                         model.base_dtype, model.config.attn_implementation)
    out = model.run_decoding(hidden, positions, context)  # [P, T, D]
    for item in items.values():
        model.finish_piece(item)
    return [out[index : index + 1, 0] if index in items else None for index in range(len(block.caches))]


def _round_rows(model: MemoryCore, block: CacheBlock, cache: MemoryCache, item: StepInput | None, rows: int
                ) -> tuple[Any, list[int], torch.Tensor]:
    """One prompt's part of a shared round: its token id, its buffer rows [T] and its bias [T, C]."""
    device, dtype, capacity, length = model.device, model.base_dtype, block.capacity, cache.length
    if length + 2 > capacity:
        raise RuntimeError("a cache of the decoding block is full: allocate the block with more rows")
    own = [length + t for t in range(rows)]
    if item is None:  # nothing read this round: placeholder rows, each seeing itself alone
        return 0, own, self_only_bias(length, rows, capacity, device, dtype)
    piece = item.piece
    bias = bucket_bias(model.config.attention, piece.ratio, piece.num_entries, piece.rows_before, piece.num_rows,
                       capacity, device, dtype)  # [T_i, C]
    if piece.num_rows < rows:  # a raw row alone: a placeholder row that sees what it sees, and itself
        placeholder = bias[:1].clone()
        placeholder[0, length + 1] = 0
        bias = torch.cat([bias, placeholder])
    return item.input_ids[0, 0], own, bias


# Under inference mode a view or an in-place write skips autograd's bookkeeping (version counters, view
# metadata), which a decoding round of a small model pays thousands of times. Nothing made here outlives
# the call: the working caches are dropped, the memory is only read, replies leave as ids.
@torch.inference_mode()
def decode(model: MemoryCore, prompts: Sequence[Sequence[int]], memory: Memory | None, max_new_tokens: int,
           sampling: Sampling, on_token: Callable[[int], None] | None = None, options: dict[str, Any] | None = None,
           exact: bool = True) -> list[list[int]]:
    """Token ids generated after `memory` (unchanged) and each prompt, through the loop; each list ends
    before the first stop token (`memorag.runtime.stop_tokens`), or with the token that completes a stop
    string. `options` are `OPTIONS`' (transformers' names and meanings); `exact` as `generate_ids_batch`'s."""
    options = dict(options or {})
    _check_options(options, on_token, len(prompts))
    plan: BatchPlan = "exact"
    block = None
    if len(prompts) > 1 and not exact:
        plan = "shared"
        block = allocate_block(model, memory, len(prompts), max(len(ids) for ids in prompts) + max_new_tokens)
        sampled = sampling.do_sample and sampling.temperature > 0  # a draw either way: nothing to warn of
        logger.log(logging.INFO if sampled else logging.WARNING, "decoding %d prompts as one batch with shared matrix "
                   "products (exact=False): a reply can differ from one-by-one decoding where two tokens (nearly) tie",
                   len(prompts))
    elif len(prompts) > 1 and model.decoding_compiled:
        plan = "alone"  # the compiled step runs one sequence's shapes: each prompt in a step of its own
        logger.info("decoding %d prompts as one batch, each in a step of its own through the compiled decoding "
                    "step", len(prompts))
    elif len(prompts) > 1:
        logger.info("decoding %d prompts as one batch over the memory (packed rows, one working copy of the "
                    "memory each, linear layers per prompt: the replies equal one-by-one decoding)", len(prompts))
    sampling = Sampling(sampling.do_sample, sampling.temperature, sampling.top_p, int(options.pop("top_k", 0) or 0),
                        float(options.pop("repetition_penalty", 1.0) or 1.0), sampling.seed)
    stop_ids = stop_token_ids(model.tokenizer, model.base_model)
    stops = Stops.of(stop_ids, options.pop("stop_strings", None) or (),
                     model.tokenizer.decode if model.tokenizer is not None else None)
    batch = DecodeBatch(MemoryRows(model, plan, block), stops, sampling)
    streamer = options.get("streamer")
    on_step = _streaming(streamer, prompts, stop_ids[0] if stop_ids else 0) if streamer is not None else None
    replies = batch.run([_request(index, (ids, memory), max_new_tokens, on_token, options)
                         for index, ids in enumerate(prompts)], on_step)
    if streamer is not None:
        streamer.end()
    return replies


def _check_options(options: dict[str, Any], on_token: Callable[[int], None] | None, num_prompts: int) -> None:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        key = unknown[0]
        raise ValueError(f"{key}={options[key]!r} is not supported by the memory model's decoding "
                         "(memorag/runtime/decode_loop.py runs every decoding); it takes do_sample, temperature, "
                         f"top_p, seed, on_token and {', '.join(OPTIONS)}: leave {key} out")
    if num_prompts > 1 and (on_token is not None or any(options.get(key) is not None for key in ONE_SEQUENCE)):
        raise ValueError("on_token, logits_processor and stopping_criteria watch one sequence (on_token streams "
                         "one sequence); decode the prompts one by one, or pass a streamer")


def _streaming(streamer: Any, prompts: Sequence[Sequence[int]], pad: int) -> Callable[[list[int]], None]:
    """transformers' streamer protocol: the prompts now (left-padded with `pad`), then each step's tokens
    (the returned `on_step`); the caller calls `end`."""
    width = max(len(ids) for ids in prompts)
    streamer.put(torch.tensor([[pad] * (width - len(ids)) + list(ids) for ids in prompts]))
    return lambda tokens: streamer.put(torch.tensor(tokens))


def _request(key: int, prompt: Any, max_new_tokens: int, on_token: Callable[[int], None] | None,
             options: dict[str, Any]) -> Request:
    return Request(key, prompt, max_new_tokens, int(options.get("min_new_tokens") or 0), on_token,
                   _callables(options.get("logits_processor")), _callables(options.get("stopping_criteria")))


def _callables(value: Any) -> tuple:
    """transformers' processor or criteria lists are callables over the whole list; None is none."""
    return () if value is None else (value,) if callable(value) else tuple(value)
