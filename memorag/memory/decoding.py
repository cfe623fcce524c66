"""The memory model decoded by transformers' `generate` (docs/memory-model.md, "Decoding").

`generate` drives the loop (greedy or sampled, logits processors, stopping criteria,
streamers, `max_new_tokens`, batches); the memory model computes each step:

- `MemoryKVCache` is the `Cache` that `generate` carries from step to step: one working
  copy of the memory per sequence (a `MemoryCache`), so tokens read during decoding go
  through the same `MemoryModel.step` as any other: after the memory, and compacted when
  their window fills, exactly as `memorize` would.
- `MemoryDecoder` is the model `generate` calls: its `forward` feeds the tokens that a
  sequence's cache has not read yet (left padding of a batch is skipped, never read) and
  returns the next-token logits of each sequence's last raw token. Several sequences are
  fed in one forward by `feed_batch` (memory/batch.py), each exactly as alone.

Beam search and other strategies that reorder or crop the cache are refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from transformers import GenerationConfig, GenerationMixin
from transformers.cache_utils import Cache
from transformers.modeling_outputs import CausalLMOutputWithPast

from memorag.cache_argument import CACHE_ARGUMENT, cache_kwargs, pop_cache
from memorag.stop_tokens import stop_token_ids

from .batch import feed_batch
from .cache import MemoryCache
from .shared_buffers import SharedBuffers, stacked_caches

if TYPE_CHECKING:
    from .model import MemoryModel
    from .state import Memory

logger = logging.getLogger(__name__)

# `generate` options that need a cache that can be reordered, cropped or shared across calls.
_UNSUPPORTED = {"num_beams": 1, "num_return_sequences": 1, "assistant_model": None, "prompt_lookup_num_tokens": None,
                "cache_implementation": None, "use_cache": True, "past_key_values": None, "cache": None}


class MemoryKVCache(Cache):
    """`generate`'s cache for the memory model: one `MemoryCache` per sequence of the batch.

    `consumed` counts the columns of `generate`'s `input_ids` already read (a batch's left
    padding included, which is skipped, not read); `finished[i]` is set once sequence i
    read a stop token, after which it reads nothing more.
    """

    def __init__(self, caches: list[MemoryCache], ratio_of: list[Callable[[int], int]], stops: Sequence[int],
                 exact: bool = True):
        super().__init__(layers=[])
        self.exact = exact  # a batch rounds each sequence as alone (memory/batch.py)
        self.caches = caches
        self.ratio_of = ratio_of
        self.stops = frozenset(int(token) for token in stops)
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

    def update(self, *args, **kwargs):
        raise NotImplementedError("MemoryKVCache is written by the memory model's own attention, never by update()")

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("the memory model decodes without beam search (num_beams=1)")


class MemoryDecoder(nn.Module, GenerationMixin):
    """The memory model as `generate` sees it; holds no weights of its own."""

    main_input_name = "input_ids"
    _is_stateful = False
    _supports_cache_class = True

    def __init__(self, model: MemoryModel):
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
    # (memorag/cache_argument.py).
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
        new = input_ids[:, cache.consumed :]
        keep = attention_mask[:, cache.consumed :].bool() if attention_mask is not None else None
        first = cache.consumed == 0
        token_ids = []
        for row in range(new.shape[0]):
            ids = new[row] if keep is None else new[row][keep[row]]
            if cache.finished[row]:
                ids = ids[:0]
            elif not first and any(int(token) in cache.stops for token in ids):
                cache.finished[row] = True  # a stop token ends the sequence: nothing after it is read
                ids = ids[:0]
            token_ids.append(ids[None])
        model = self.memory_model
        last = feed_batch(model, token_ids, cache.caches, cache.ratio_of, exact=cache.exact)
        cache.consumed = input_ids.shape[1]
        vocab = model.lm_head.out_features
        logits = torch.zeros(len(last), 1, vocab, device=model.device, dtype=model.base_dtype)
        fed = [row for row, hidden in enumerate(last) if hidden is not None]
        if cache.exact or len(fed) == 1:  # one row at a time, as alone (see memory/batch.py on rounding)
            for row, row_logits in zip(fed, model.logits_alone([last[row] for row in fed]), strict=True):
                logits[row, 0] = row_logits[0].to(logits.dtype)
        elif fed:
            hidden = torch.cat([last[row] for row in fed], dim=0)  # [n, D]
            logits[fed, 0] = model.logits(hidden).to(logits.dtype)
        return CausalLMOutputWithPast(logits=logits, **cache_kwargs(cache))


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
# metadata), which a decoding round of a small model pays thousands of times: on a 2-core AMD EPYC the
# demo's decoding rounds took about 8% less (benchmarks/results/inference-mode-2026-11-27/). Nothing made
# here outlives the call: the working caches are dropped, the memory is only read, replies leave as ids.
@torch.inference_mode()
def decode(
    model: MemoryModel,
    prompts: Sequence[Sequence[int]],
    memory: Memory | None,
    ratios: Sequence[int | None],
    max_new_tokens: int,
    do_sample: bool,
    temperature: float,
    top_p: float,
    seed: int | None,
    on_token: Callable[[int], None] | None,
    generate_kwargs: dict[str, Any],
    exact: bool = True,
) -> list[list[int]]:
    """Token ids generated after `memory` (unchanged) and each prompt (its memory's ratio, or
    `ratios[i]` without a memory), by `generate`; each list ends before the first stop token
    (`memorag.stop_tokens`)."""
    for key, allowed in _UNSUPPORTED.items():
        if key in generate_kwargs and generate_kwargs[key] != allowed:
            raise ValueError(f"{key}={generate_kwargs[key]!r} is not supported by the memory model's decoding "
                             f"(it needs a cache that can be reordered or replaced); leave {key} out")
    if on_token is not None and len(prompts) > 1:
        raise ValueError("on_token streams one sequence; decode the prompts one by one, or pass a streamer")
    if len(prompts) > 1 and model.decoding_compiled and exact:
        # the compiled batch shares matrix products among the prompts (memory/shared_buffers.py); an exact batch's
        # replies equal one-by-one decoding, so its prompts go through the compiled step one after another
        logger.info("decoding %d prompts one after another through the compiled decoding step", len(prompts))
        return [decode(model, [ids], memory, [ratio], max_new_tokens, do_sample, temperature, top_p, seed, None,
                       dict(generate_kwargs))[0] for ids, ratio in zip(prompts, ratios, strict=True)]
    stops = stop_token_ids(model.tokenizer, model.base_model)
    if len(prompts) > 1 and model.decoding_compiled:  # one batch through the compiled step
        longest = max(len(ids) for ids in prompts) + max_new_tokens
        caches = SharedBuffers.allocate(model, memory, len(prompts), longest).caches
    else:  # each the cache it has alone; rows of one buffer per layer where their capacities agree
        reserves = [len(ids) + max_new_tokens for ids in prompts]
        caches = stacked_caches(model, memory, reserves) or [model.new_cache(memory, reserve=reserve)
                                                             for reserve in reserves]
    cache = MemoryKVCache(caches, [model.ratio_function(ratio) for ratio in ratios], stops, exact=exact)
    width = max(len(ids) for ids in prompts)
    pad = stops[0] if stops else 0
    input_ids = torch.tensor([[pad] * (width - len(ids)) + list(ids) for ids in prompts], dtype=torch.long,
                             device=model.device)
    attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], dtype=torch.long,
                                  device=model.device)
    sampling = do_sample and temperature > 0
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=sampling,
                              temperature=temperature if sampling else None, top_p=top_p if sampling else None,
                              eos_token_id=stops or None, pad_token_id=pad)
    streamer = _TokenStreamer(on_token, cache.stops, generate_kwargs.pop("streamer", None))
    if len(prompts) > 1 and exact:
        logger.info("decoding %d prompts as one batch over the memory (packed rows, one working copy of the "
                    "memory each, linear layers per prompt: the replies equal one-by-one decoding)", len(prompts))
    elif len(prompts) > 1:
        logger.warning("decoding %d prompts as one batch with shared matrix products (exact=False%s): a reply can "
                       "differ from one-by-one decoding where two tokens (nearly) tie", len(prompts),
                       ", through the compiled step" if model.decoding_compiled else "")
    decoder = MemoryDecoder(model)
    with torch.random.fork_rng(devices=[model.device] if model.device.type == "cuda" else []):
        if seed is not None:
            torch.manual_seed(seed)
        output = decoder.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config,
                                  streamer=streamer, **cache_kwargs(cache), **generate_kwargs)
    results = []
    for row in output[:, width:].tolist():
        ids = []
        for token in row:
            if token in cache.stops:
                break
            ids.append(int(token))
        results.append(ids)
    return results
