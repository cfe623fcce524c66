"""The decoder layer's computation: the products, the kernels, memory-aware attention and the block.

`MemoryAttention` keeps the family's own attention as `base_layer` (frozen) and adds the
memory projections (`memory.q/k/v[/o]`, copies of the base projections). It holds no state:
each call receives a `StepContext` (from the decoder block, `attention.decoder_block`, as `memory_step`)
that says which of the step's rows are memory tokens (raw and memory rows come interleaved,
in sequence order; raw rows use the base projections, memory rows the memory projections,
each computed only for its own rows) and where its keys and values go. Without a context it
is the base attention, untouched, so a patched model still runs as plain transformers.

The contexts, one per kind of step (the caller of the step names the kind, memory/core.py), live
with the cache they write to (memory/cache.py; `StepContext` here is what a layer asks of them):
- `ValidRowsStep`: a piece of a window over its cache's valid rows;
- `WholeBufferStep`: a decoding step over whole cache buffers with an additive bias, its shapes the
  same token after token, so that it compiles whole;
- `PackedSequencesStep`: several sequences' steps packed along one row axis, each attending as alone
  (`PackedStepRows` packs their rows).
Both kinds attend through the one kernel registry (`KERNELS`, the kernel the config names), each
kernel taking the keys a query sees in either form (`KeysSeen`), and the layer's head groups
(grouped-query attention is decided once, when the layer is wrapped: `MemoryAttention.kv_groups`).
Every product of the layer (projections, MLP, the model's head) goes through `project`, which can
round each sequence of a packed batch as alone (the products section below says how and why), and
`decoder_block` is the layer's forward for every supported family.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right

from .families import Family
from .schedule import RawMemoryRows, full_mask


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` [B, H, T, d] by `cos`/`sin` [B or 1, T, d] (the Llama half-split convention)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + rotate_half(x) * sin


# -- the products ---------------------------------------------------------------------------------
# The memory model's products over packed rows (docs/memory-model.md, "Linear layers in decoding").
#
# An exact batch (`PackedStepRows`, memory/attention.py) decodes each sequence bit for bit as one-by-one
# decoding does, so each linear layer must round a sequence's rows as it rounds them alone. A matrix
# product's rounding depends on its shape: `F.linear` over one row takes a matrix-vector kernel, over
# several a matrix-matrix one that sums in another order, and a small model's logits tie often enough
# that one rounding step changes a greedy reply. `project(layer, rows, sequences)` is `layer(rows)`; with
# `sequences` (a `SequenceRows`: the sequences' bounds for each row count the step projects), it computes
# each sequence's rows as a product of their own, with the strides a lone sequence's rows have, and
# concatenates them. The bounds are an argument, handed down by the step that packs the rows: nothing is
# read from the thread or the module.
#
# Sequences with the same number of rows (in a decoding round: one raw row each, or two with a memory
# token) may be multiplied together, in one of three ways: `together`, one `F.linear` over all their rows
# (on a CPU whose kernel sums each row alike whatever the rows beside it, bf16 on AMX among them, the same
# bits as alone at the cost of one shared product); `batched`, one `torch.bmm` against the weight (torch on
# the CPU computes it as one product per sequence with its own shape; on other kernels it copies the
# weight at each call); or `each`, one `F.linear` per sequence, always as alone. Which ones round as alone,
# and which of those is fastest, depends on the device, the dtype and the kernels, so it is measured, not
# assumed: the first time a shape (rows per sequence, sequences, features, dtypes, device, threads) is met,
# `together` and `batched` are computed on random rows and compared bit for bit with `each`, and the
# fastest of the ways that match is kept for that shape. The answers are a table the model owns
# (`ExactProducts`, one per memory model) and hands down with the bounds; torch's thread count is part of
# a shape's key, as it decides how the CPU kernel splits a product.
#
# A layer that is not a plain `nn.Linear` (peft's low-rank layers, bitsandbytes' quantized ones) is called
# as a module on each sequence's rows: what it computes for a lone sequence, whatever it is.
TOGETHER, BATCHED, EACH = "together", "batched", "each"  # the ways to multiply sequences of equal size
# (the way, a call computing it) -> seconds the call takes: how `ExactProducts` times the ways
Timer = Callable[[str, Callable[[], object]], float]


def best_seconds(way: str, call: Callable[[], object], rounds: int = 3) -> float:
    """The fastest of `rounds` runs of `call`, after one untimed run."""
    call()
    best = math.inf
    for _ in range(rounds):
        started = time.perf_counter()
        out = call()
        if isinstance(out, torch.Tensor) and out.is_cuda:
            torch.cuda.synchronize(out.device)
        best = min(best, time.perf_counter() - started)
    return best


class ExactProducts:
    """Per shape, the fastest way to multiply sequences of equal size that rounds each as alone; the first
    question for a shape checks and times the ways on random rows (`timer`), later ones read the answer."""

    def __init__(self, timer: Timer = best_seconds) -> None:
        self.timer = timer
        self.known: dict[tuple, str] = {}

    def way(self, layer: nn.Linear, size: int, count: int, like: torch.Tensor) -> str:
        key = (layer.in_features, layer.out_features, layer.bias is not None, size, count, like.dtype, like.device,
               layer.weight.dtype, torch.get_num_threads())
        known = self.known.get(key)
        if known is None:
            known = self.known[key] = self._fastest(layer, size, count, like)
        return known

    def _fastest(self, layer: nn.Linear, size: int, count: int, like: torch.Tensor) -> str:
        generator = torch.Generator(device=like.device).manual_seed(0)
        rows = torch.randn(count, size, layer.in_features, generator=generator, device=like.device).to(like.dtype)
        with torch.no_grad():
            alone = multiply(EACH, rows, layer)
            exact = [way for way in (TOGETHER, BATCHED) if torch.equal(multiply(way, rows, layer), alone)]
            return min([*exact, EACH], key=lambda way: self.timer(way, lambda: multiply(way, rows, layer)))


def multiply(way: str, rows: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """`rows` [P, n, in] (P sequences of n rows, contiguous) through `layer` the way `way` says: [P, n, out]."""
    if way == TOGETHER:
        return F.linear(rows.reshape(-1, rows.shape[-1]), layer.weight, layer.bias).view(*rows.shape[:2], -1)
    if way == BATCHED:
        return products_together(rows, layer.weight, layer.bias)
    return torch.cat([F.linear(rows[index : index + 1], layer.weight, layer.bias) for index in range(rows.shape[0])])


@dataclass(frozen=True)
class SequenceRows:
    """Which packed rows belong to which sequence: `bounds[N]` ([0, ..., N]) splits a tensor of N rows (all
    of a step's rows, or its raw rows, or its memory rows, projected apart); `products` is the model's table."""

    bounds: dict[int, list[int]]
    products: ExactProducts = field(compare=False)

    @classmethod
    def one_each(cls, count: int, products: ExactProducts) -> SequenceRows:
        """`count` rows, each a sequence of its own."""
        return cls({count: list(range(count + 1))}, products)


def project(layer: nn.Module, inputs: torch.Tensor, sequences: SequenceRows | None = None) -> torch.Tensor:
    """`layer(inputs)` ([..., N, in]); with `sequences`, each sequence's rows as when it is alone."""
    bounds = sequences.bounds.get(inputs.shape[-2]) if sequences is not None and inputs.dim() >= 2 else None
    if bounds is None or len(bounds) <= 2:
        return layer(inputs)
    sizes = [end - start for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
    # each sequence's rows with the strides a lone sequence's rows have: a view into the packed rows keeps
    # the packed strides, which send `F.linear` to another kernel (a batched product); a view of the view
    # with its own shape takes the plain strides without a copy, as the rows are contiguous
    parts = [rows.contiguous().view(rows.shape) for rows in inputs.split(sizes, dim=-2)]
    if not is_plain_linear(layer):
        return torch.cat([layer(part) for part in parts if part.shape[-2]], dim=-2)
    outputs: list[torch.Tensor | None] = [None] * len(parts)
    for size, members in _by_size(sizes).items():
        way = sequences.products.way(layer, size, len(members), inputs) if len(members) > 1 else EACH
        if way == EACH:
            for index in members:
                outputs[index] = F.linear(parts[index], layer.weight, layer.bias)
            continue
        stacked = torch.stack([parts[index].reshape(size, -1) for index in members])  # [P, size, in]
        together = multiply(way, stacked, layer)  # [P, size, out]
        for row, index in enumerate(members):
            outputs[index] = together[row].view(*parts[index].shape[:-1], -1)
    return torch.cat([out for out in outputs if out is not None], dim=-2)


def _by_size(sizes: list[int]) -> dict[int, list[int]]:
    """Sequence indices by their number of rows, in order; sequences without rows left out."""
    groups: dict[int, list[int]] = {}
    for index, size in enumerate(sizes):
        if size:
            groups.setdefault(size, []).append(index)
    return groups


def products_together(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`rows` [P, n, in] times the weight [out, in] as P products of one sequence each: [P, n, out]."""
    shared = weight.T.expand(rows.shape[0], -1, -1)  # [P, in, out], no copy
    if bias is None:
        return torch.bmm(rows, shared)
    return torch.baddbmm(bias.expand(rows.shape[0], rows.shape[1], -1), rows, shared)


def is_plain_linear(module: nn.Module) -> bool:
    """A plain linear layer: `nn.Linear` itself (not a quantized or low-rank subclass or wrapper)."""
    return type(module) is nn.Linear


# -- the kernels ----------------------------------------------------------------------------------
@dataclass
class KeysSeen:
    """Which keys each query of a step sees, in one of two forms.

    A window step's keys are the cache's valid rows `[prefix | tail]`: the first `prefix` (memory
    entries) seen by every query, `mask` [Tq, tail] (True: may attend) over the rest, None for causal
    aligned to the last key. A decoding step's keys are whole cache buffers: `bias` [Tq, C] (0: seen,
    -inf: not), or [B, Tq, C] each sequence its own, over every buffer row (`bucket_bias`)."""

    prefix: int = 0
    mask: torch.Tensor | None = None
    bias: torch.Tensor | None = None


# (query [B, H, Tq, d], key/value [B, H_kv, S, d], keys seen, scale, query heads per key/value head)
# -> [B, Tq, H, d]. The head groups are the layer's constant (`MemoryAttention.kv_groups`), never
# compared from tensor shapes: inside a graph compiled with dynamic shapes that gives a SymBool SDPA refuses.
Kernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, KeysSeen, float, int], torch.Tensor]


def sdpa(query, key, value, seen: KeysSeen, scale: float, groups: int) -> torch.Tensor:
    """`F.scaled_dot_product_attention`. Over whole buffers the bias is the mask; every shape then depends
    on the capacity, not the length, so kernels (and a CUDA backend's plans) are reused token after token.
    Over valid rows: `is_causal` when the keys are exactly the queries' own rows, else a boolean mask
    (every memory entry, then the window's). On CUDA the causal mask aligned to the last key (a window after
    its memory) is torch's `causal_lower_right`, which SDPA runs as flash attention's own causal mask: no
    mask tensor, and faster than the boolean mask's kernel."""
    if seen.bias is not None:
        bias = seen.bias[:, None] if seen.bias.dim() == 3 else seen.bias  # [B, 1, Tq, C]: every head
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=bias, scale=scale, enable_gqa=groups > 1)
        return out.transpose(1, 2)
    num_queries, num_keys = query.shape[2], key.shape[2]
    is_causal = seen.mask is None and num_queries == num_keys
    full = None
    if seen.mask is None and 1 < num_queries < num_keys and query.is_cuda:
        full = causal_lower_right(num_queries, num_keys)
    elif not is_causal and not (seen.mask is None and num_queries == 1):
        full = full_mask(num_queries, seen.prefix, num_keys - seen.prefix, seen.mask, query.device)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=full, is_causal=is_causal, scale=scale,
                                         enable_gqa=groups > 1)
    return out.transpose(1, 2)


def eager(query, key, value, seen: KeysSeen, scale: float, groups: int) -> torch.Tensor:
    """Plain matmul-softmax, for debugging."""
    if groups > 1:
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scores = torch.matmul(query, key.transpose(2, 3)) * scale  # [B, H, Tq, S]
    if seen.bias is not None:
        scores = scores + (seen.bias[:, None] if seen.bias.dim() == 3 else seen.bias)
    else:
        full = full_mask(query.shape[2], seen.prefix, key.shape[2] - seen.prefix, seen.mask, query.device)
        scores = scores.masked_fill(~full, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, value).transpose(1, 2)


def flash_attention_2(query, key, value, seen: KeysSeen, scale: float, groups: int) -> torch.Tensor:
    """FlashAttention 2 on CUDA, whose causal mask is aligned to the last key: exactly the case of valid rows
    without a mask; a mask, a bias, or the CPU, goes to `sdpa`."""
    if seen.mask is not None or seen.bias is not None or not query.is_cuda:
        return sdpa(query, key, value, seen, scale, groups)
    from flash_attn import flash_attn_func

    return flash_attn_func(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), softmax_scale=scale,
                           causal=True)


# `MemoryConfig.attn_implementation` -> the kernel every step's rows attend with: the one registry
KERNELS: dict[str, Kernel] = {"sdpa": sdpa, "eager": eager, "flash_attention_2": flash_attention_2}


def head_groups(config) -> tuple[int, int]:
    """A model config's key/value heads and query heads per key/value head (grouped-query attention)."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return kv_heads, heads // kv_heads


# -- what a layer asks of a step's context ------------------------------------------------------------
class StepContext(Protocol):
    """What every layer of one step is given: which rows are memory tokens, the dtype of the cache, and
    where the keys (rotated to their positions) go and what they attend over."""

    rows: RawMemoryRows | None  # which rows are memory tokens (None: all raw)
    dtype: torch.dtype | None  # the cache's dtype (the base model's), so all rows agree

    def attend(self, attention: MemoryAttention, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> torch.Tensor:
        """Write the step's `key`/`value` [B, H_kv, T, d] for `attention`'s layer and attend `query`
        [B, H, T, d] over them; [B, T, H, d]."""
        ...


# -- the module -----------------------------------------------------------------------------------
def trainable_copy(projection: nn.Module) -> nn.Linear:
    """A trainable copy of a base projection: always a plain `nn.Linear`, biases included.

    A quantized base (bitsandbytes 4-bit or 8-bit layers, which subclass `nn.Linear`)
    is dequantized, so the memory projections stay full-precision trainable weights.
    """
    if is_plain_linear(projection):
        return copy.deepcopy(projection)
    from transformers.integrations.bitsandbytes import dequantize_bnb_weight

    weight = dequantize_bnb_weight(projection.weight, state=getattr(projection, "state", None))
    dtype = weight.dtype if weight.is_floating_point() else getattr(projection, "compute_dtype", None) or torch.float32
    linear = nn.Linear(projection.in_features, projection.out_features, bias=projection.bias is not None,
                       device=weight.device, dtype=dtype)
    with torch.no_grad():
        linear.weight.copy_(weight.to(dtype))
        if projection.bias is not None:
            linear.bias.copy_(projection.bias.to(dtype))
    return linear


class MemoryAttention(nn.Module):
    """A base attention module plus the memory tokens' own projections."""

    def __init__(self, base_layer: nn.Module, family: Family, memory_params: str) -> None:
        super().__init__()
        self.base_layer = base_layer
        q_name, k_name, v_name, o_name = family.projections
        names = {"q": q_name, "k": k_name, "v": v_name}
        if memory_params == "qkvo":
            names["o"] = o_name
        self.memory = nn.ModuleDict({short: trainable_copy(getattr(base_layer, name)) for short, name in names.items()})
        self.memory.requires_grad_(True)
        self.projection_names = family.projections
        self.qk_norms = family.qk_norms
        self.layer_idx: int = base_layer.layer_idx
        self.head_dim: int = base_layer.head_dim
        self.scaling: float = base_layer.scaling
        # grouped-query attention, decided here once: query heads per key/value head, a constant of the layer
        self.num_kv_heads, self.kv_groups = head_groups(base_layer.config)

    def _project(self, short: str, hidden: torch.Tensor, parts, rows: RawMemoryRows | None,
                 sequences: SequenceRows | None) -> torch.Tensor:
        """Project `hidden` [B, T, D] with the base projection `short`, memory rows with the memory one; with
        `sequences`, each sequence's rows as alone (`project`, memory/attention.py)."""
        base = getattr(self.base_layer, self.projection_names["qkvo".index(short)])
        if rows is None or short not in self.memory:
            return project(base, hidden, sequences)
        raw, memory = parts
        return rows.merge(project(base, raw, sequences), project(self.memory[short], memory, sequences))

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        memory_step: StepContext | None = None,
        sequences: SequenceRows | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        if memory_step is None:
            return self.base_layer(hidden_states=hidden_states, position_embeddings=position_embeddings,
                                   attention_mask=attention_mask, **kwargs)
        batch, num_rows, _ = hidden_states.shape
        shape = (batch, num_rows, -1, self.head_dim)
        rows = memory_step.rows
        parts = rows.split(hidden_states) if rows is not None else None
        dtype = memory_step.dtype or hidden_states.dtype  # memory projections may be kept in fp32
        query = self._project("q", hidden_states, parts, rows, sequences).view(shape).to(dtype)  # [B, T, H, d]
        key = self._project("k", hidden_states, parts, rows, sequences).view(shape).to(dtype)  # [B, T, H_kv, d]
        value = self._project("v", hidden_states, parts, rows, sequences).view(shape).transpose(1, 2).to(dtype)
        if self.qk_norms is not None:
            query = getattr(self.base_layer, self.qk_norms[0])(query)
            key = getattr(self.base_layer, self.qk_norms[1])(key)
        query, key = query.transpose(1, 2), key.transpose(1, 2)  # [B, H(_kv), T, d]
        cos, sin = position_embeddings
        query, key = apply_rope(query, cos, sin), apply_rope(key, cos, sin)
        out = memory_step.attend(self, query, key, value).reshape(batch, num_rows, -1)  # [B, T, H * d]
        out_parts = rows.split(out) if rows is not None and "o" in self.memory else None
        return self._project("o", out, out_parts, rows, sequences), None


# -- the decoder block ------------------------------------------------------------------------------
def decoder_block(family: Family, layer: nn.Module, hidden: torch.Tensor,
                  attend: Callable[[torch.Tensor], torch.Tensor], sequences: SequenceRows | None = None
                  ) -> torch.Tensor:
    """One decoder layer over `hidden` [B, T, D], the layer's forward for every supported family (the memory
    model's and the plain decoder's): `attend(normed rows)` -> the attention's output [B, T, D] (the caller's
    attention and its context), then the gated MLP, each added to the residual, in the order of operations
    of transformers' Llama, Mistral, Qwen2 and Qwen3 layers (so the results are theirs bit for bit). It is
    ours so that an exact batch's split (`sequences`: each sequence's rows through every MLP product as
    alone, `project` above) is an argument; transformers keeps the modules, weights and configuration."""
    before_attention, before_mlp = (getattr(layer, name) for name in family.norms)
    hidden = hidden + attend(before_attention(hidden))
    mlp_name, gate, up, down = family.mlp
    mlp = getattr(layer, mlp_name)
    normed = before_mlp(hidden)
    gated = mlp.act_fn(project(getattr(mlp, gate), normed, sequences)) * project(getattr(mlp, up), normed, sequences)
    return hidden + project(getattr(mlp, down), gated, sequences)
