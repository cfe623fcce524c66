"""The memory model decoded by transformers' `generate` (docs/memory-model.md, "Decoding").

`generate` drives the loop (greedy or sampled, logits processors, stopping criteria,
streamers, `max_new_tokens`, batches); the memory model computes each step:

- `MemoryKVCache` is the `Cache` that `generate` carries from step to step: one working
  copy of the memory per sequence (a `MemoryCache`), so tokens read during decoding go
  through the same step as any other: after the memory, and compacted when their window
  fills, exactly as `memorize` would.
- `MemoryDecoder` is the model `generate` calls: its `forward` feeds the tokens that a
  sequence's cache has not read yet (left padding of a batch is skipped, never read) and
  returns the next-token logits of each sequence's last raw token. The prompts are read as
  window steps; every later round reads one token per sequence as a decoding step.
- `decode` is the one place that decides how several prompts decode: an exact batch packs their
  rows into one step per round, each sequence attending and rounding as alone
  (`MemoryCore.read_tokens_batch`, `PackedStepRows`), or with compiled decoding goes through the
  compiled step one prompt after another (packed rows change shape from round to round, which a
  compiled step cannot follow); without `exact`, their caches are rows of one `CacheBlock` and a
  round is one `WholeBufferStep` over all of them (`shared_round`), the matrix products shared,
  compiled or eager alike.

Beam search and other strategies that reorder or crop the cache are refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from transformers import GenerationConfig, GenerationMixin
from transformers.cache_utils import Cache
from transformers.modeling_outputs import CausalLMOutputWithPast

from memorag.runtime.cache_argument import CACHE_ARGUMENT, cache_kwargs, pop_cache
from memorag.runtime.stop_tokens import stop_token_ids

from .attention import KeysSeen, WholeBufferStep
from .cache import CacheBlock, MemoryCache, bucketed
from .core import MemoryCore, StepInput, plan_steps
from .masks import bucket_bias, raw_then_memory, self_only_bias
from .schedule import ScheduleState
from .state import Memory

logger = logging.getLogger(__name__)

# `generate` options that need a cache that can be reordered, cropped or shared across calls.
_UNSUPPORTED = {"num_beams": 1, "num_return_sequences": 1, "assistant_model": None, "prompt_lookup_num_tokens": None,
                "cache_implementation": None, "use_cache": True, "past_key_values": None, "cache": None}


class MemoryKVCache(Cache):
    """`generate`'s cache for the memory model: one `MemoryCache` per sequence of the batch.

    `consumed` counts the columns of `generate`'s `input_ids` already read (a batch's left
    padding included, which is skipped, not read); `finished[i]` is set once sequence i
    read a stop token, after which it reads nothing more. `block`: the `CacheBlock` whose rows
    the caches are, when several prompts decode as one batch with shared products (`shared_round`).
    """

    def __init__(self, caches: list[MemoryCache], ratio_of: list[Callable[[int], int]], stops: Sequence[int],
                 exact: bool = True, block: CacheBlock | None = None):
        super().__init__(layers=[])
        self.exact = exact  # a batch rounds each sequence as alone (`PackedStepRows.linears`)
        self.caches = caches
        self.ratio_of = ratio_of
        self.stops = frozenset(int(token) for token in stops)
        self.block = block
        self.consumed = 0
        self.finished = [False] * len(caches)

    @property
    def is_compileable(self) -> bool:
        return False

    @property
    def is_croppable(self) -> bool:
        return False

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Columns of `generate`'s `input_ids` read so far (what `generate` counts as the past)."""
        return self.consumed

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               cache_kwargs: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """transformers' write path, for a batch of one sequence: its `MemoryCache.update`. The sequences of a
        larger batch hold caches of different lengths, which no single tensor of keys can return."""
        if len(self.caches) != 1:
            raise ValueError(f"this cache holds {len(self.caches)} sequences, each a MemoryCache of its own "
                             "length; write each sequence through its cache's update (MemoryKVCache.caches[i])")
        return self.caches[0].update(key_states, value_states, layer_idx, cache_kwargs)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("the memory model decodes without beam search (num_beams=1)")

    def unread(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> list[torch.Tensor]:
        """Each sequence's tokens [1, n_i] of `input_ids` not read yet (none once it read a stop token)."""
        new = input_ids[:, self.consumed :]
        keep = attention_mask[:, self.consumed :].bool() if attention_mask is not None else None
        token_ids = []
        for row in range(new.shape[0]):
            ids = new[row] if keep is None else new[row][keep[row]]
            if self.finished[row]:
                ids = ids[:0]
            elif self.consumed and any(int(token) in self.stops for token in ids):
                self.finished[row] = True  # a stop token ends the sequence: nothing after it is read
                ids = ids[:0]
            token_ids.append(ids[None])
        self.consumed = input_ids.shape[1]
        return token_ids


class MemoryDecoder(nn.Module, GenerationMixin):
    """The memory model as `generate` sees it; holds no weights of its own."""

    main_input_name = "input_ids"
    _is_stateful = False
    _supports_cache_class = True

    def __init__(self, model: MemoryCore):
        super().__init__()
        self.__dict__["memory_model"] = model  # not a submodule: the weights stay the memory model's
        self.config = model.base_model.config
        self.generation_config = GenerationConfig()  # nothing inherited: the caller says how to decode

    @property
    def device(self) -> torch.device:
        return self.memory_model.device

    @property
    def dtype(self) -> torch.dtype:
        return self.memory_model.base_dtype

    @classmethod
    def can_generate(cls) -> bool:
        return True

    def get_experts_implementation(self) -> dict:
        """No mixture-of-experts layers to switch kernels for (asked by `generate`)."""
        return {}

    # Both names of the cache are in the signatures: `generate` checks its keywords against them
    # and passes the cache as `cache` from transformers 5.24, as `past_key_values` before
    # (memorag/runtime/cache_argument.py).
    def prepare_inputs_for_generation(self, input_ids: torch.LongTensor, cache: MemoryKVCache | None = None,
                                      past_key_values: MemoryKVCache | None = None,
                                      attention_mask: torch.Tensor | None = None, **kwargs) -> dict:
        found = pop_cache({"cache": cache, "past_key_values": past_key_values})
        return {"input_ids": input_ids, CACHE_ARGUMENT: found, "attention_mask": attention_mask}

    def forward(self, input_ids: torch.LongTensor, cache: MemoryKVCache | None = None,
                past_key_values: MemoryKVCache | None = None, attention_mask: torch.Tensor | None = None,
                **kwargs) -> CausalLMOutputWithPast:
        cache = pop_cache({"cache": cache, "past_key_values": past_key_values})
        if not isinstance(cache, MemoryKVCache):
            raise ValueError("the memory model decodes from a MemoryKVCache; call MemoryModel.generate_ids")
        model = self.memory_model
        prompts = cache.consumed == 0
        token_ids = cache.unread(input_ids, attention_mask)
        if cache.block is not None and not prompts:
            last = shared_round(model, cache.block, token_ids, cache.ratio_of)
        else:
            kind = "window" if prompts else "decode"
            last = model.read_tokens_batch(token_ids, cache.caches, cache.ratio_of, kind, exact=cache.exact)
        logits = torch.zeros(len(last), 1, model.lm_head.out_features, device=model.device, dtype=model.base_dtype)
        fed = [row for row, hidden in enumerate(last) if hidden is not None]
        if cache.exact or len(fed) == 1:  # one row at a time, as alone (see `PackedStepRows` on rounding)
            for row, row_logits in zip(fed, model.logits_alone([last[row] for row in fed]), strict=True):
                logits[row, 0] = row_logits[0].to(logits.dtype)
        elif fed:
            hidden = torch.cat([last[row] for row in fed], dim=0)  # [n, D]
            logits[fed, 0] = model.logits(hidden).to(logits.dtype)
        return CausalLMOutputWithPast(logits=logits, **cache_kwargs(cache))


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


class _TokenStreamer:
    """transformers' streamer protocol calling `on_token` with each new token before the first stop;
    the prompt (the first `put`) is skipped; forwards everything to `inner` (a user's streamer) too."""

    def __init__(self, on_token: Callable[[int], None] | None, stops: frozenset[int], inner=None):
        self.on_token, self.stops, self.inner = on_token, stops, inner
        self.prompt_seen = False
        self.stopped = False

    def put(self, value: torch.Tensor) -> None:
        if self.inner is not None:
            self.inner.put(value)
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        for token in value.reshape(-1).tolist():
            if self.stopped or int(token) in self.stops:
                self.stopped = True
                return
            if self.on_token is not None:
                self.on_token(int(token))

    def end(self) -> None:
        if self.inner is not None:
            self.inner.end()


# Under inference mode a view or an in-place write skips autograd's bookkeeping (version counters, view
# metadata), which a decoding round of a small model pays thousands of times. Nothing made here outlives
# the call: the working caches are dropped, the memory is only read, replies leave as ids.
@torch.inference_mode()
def decode(model: MemoryCore, prompts: Sequence[Sequence[int]], memory: Memory | None, ratios: Sequence[int | None],
           max_new_tokens: int, do_sample: bool, temperature: float, top_p: float, seed: int | None,
           on_token: Callable[[int], None] | None, generate_kwargs: dict[str, Any], exact: bool = True
           ) -> list[list[int]]:
    """Token ids generated after `memory` (unchanged) and each prompt (its memory's ratio, or
    `ratios[i]` without a memory), by `generate`; each list ends before the first stop token
    (`memorag.runtime.stop_tokens`)."""
    _check_options(generate_kwargs, on_token, len(prompts))
    if len(prompts) > 1 and exact and model.decoding_compiled:
        # the compiled step runs one prompt's shapes, or a shared block's; an exact batch keeps it by decoding
        # its prompts through it one after another (each reply as alone)
        logger.info("decoding %d prompts one after another through the compiled decoding step", len(prompts))
        return [decode(model, [ids], memory, [ratio], max_new_tokens, do_sample, temperature, top_p, seed, None,
                       dict(generate_kwargs))[0] for ids, ratio in zip(prompts, ratios, strict=True)]
    stops = stop_token_ids(model.tokenizer, model.base_model)
    cache = _decoding_cache(model, prompts, memory, ratios, max_new_tokens, stops, exact)
    width, pad = max(len(ids) for ids in prompts), stops[0] if stops else 0
    input_ids = torch.tensor([[pad] * (width - len(ids)) + list(ids) for ids in prompts], dtype=torch.long,
                             device=model.device)
    attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], dtype=torch.long,
                                  device=model.device)
    sampling = do_sample and temperature > 0
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=sampling,
                              temperature=temperature if sampling else None, top_p=top_p if sampling else None,
                              eos_token_id=stops or None, pad_token_id=pad)
    streamer = _TokenStreamer(on_token, cache.stops, generate_kwargs.pop("streamer", None))
    with torch.random.fork_rng(devices=[model.device] if model.device.type == "cuda" else []):
        if seed is not None:
            torch.manual_seed(seed)
        output = MemoryDecoder(model).generate(input_ids=input_ids, attention_mask=attention_mask,
                                               generation_config=config, streamer=streamer, **cache_kwargs(cache),
                                               **generate_kwargs)
    return [_until_stop(row, cache.stops) for row in output[:, width:].tolist()]


def _check_options(generate_kwargs: dict[str, Any], on_token, num_prompts: int) -> None:
    for key, allowed in _UNSUPPORTED.items():
        if key in generate_kwargs and generate_kwargs[key] != allowed:
            raise ValueError(f"{key}={generate_kwargs[key]!r} is not supported by the memory model's decoding "
                             f"(it needs a cache that can be reordered or replaced); leave {key} out")
    if on_token is not None and num_prompts > 1:
        raise ValueError("on_token streams one sequence; decode the prompts one by one, or pass a streamer")


def _decoding_cache(model: MemoryCore, prompts: Sequence[Sequence[int]], memory: Memory | None,
                    ratios: Sequence[int | None], max_new_tokens: int, stops: list[int], exact: bool) -> MemoryKVCache:
    """The working caches of a decoding: each prompt's own (an exact batch is packed step by step), or
    without `exact` several prompts' caches as rows of one block (their rounds shared, `shared_round`)."""
    ratio_of = [model.ratio_function(ratio) for ratio in ratios]
    if len(prompts) > 1 and not exact:
        block = allocate_block(model, memory, len(prompts), max(len(ids) for ids in prompts) + max_new_tokens)
        logger.warning("decoding %d prompts as one batch with shared matrix products (exact=False): a reply can "
                       "differ from one-by-one decoding where two tokens (nearly) tie", len(prompts))
        return MemoryKVCache(block.caches, ratio_of, stops, exact=False, block=block)
    if len(prompts) > 1:
        logger.info("decoding %d prompts as one batch over the memory (packed rows, one working copy of the "
                    "memory each, linear layers per prompt: the replies equal one-by-one decoding)", len(prompts))
    caches = [model.new_cache(memory, reserve=len(ids) + max_new_tokens) for ids in prompts]
    return MemoryKVCache(caches, ratio_of, stops, exact=exact)


def _until_stop(row: list[int], stops: frozenset[int]) -> list[int]:
    ids = []
    for token in row:
        if token in stops:
            break
        ids.append(int(token))
    return ids
