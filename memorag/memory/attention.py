"""Memory-aware attention: the step contexts, the kernels, and the module wrapping a base attention.

`MemoryAttention` keeps the family's own attention as `base_layer` (frozen) and adds the
memory projections (`memory.q/k/v[/o]`, copies of the base projections). It holds no state:
each call receives a `StepContext` (from the decoder block, `attention.decoder_block`, as `memory_step`)
that says which of the step's rows are memory tokens (raw and memory rows come interleaved,
in sequence order; raw rows use the base projections, memory rows the memory projections,
each computed only for its own rows) and where its keys and values go. Without a context it
is the base attention, untouched, so a patched model still runs as plain transformers.

The contexts, one per kind of step (the caller of the step names the kind, memory/core.py):
- `ValidRowsStep`: a piece of a window over its cache's valid rows;
- `WholeBufferStep`: a decoding step over whole cache buffers with an additive bias, its shapes the
  same token after token, so that it compiles whole;
- `PackedSequencesStep`: several sequences' steps packed along one row axis, each attending as alone
  (`PackedStepRows` packs their rows).
Both kinds attend through the one kernel registry (`KERNELS`, the kernel the config names), each
kernel taking the keys a query sees in either form (`KeysSeen`), and the layer's head groups
(grouped-query attention is decided once, when the layer is wrapped: `MemoryAttention.kv_groups`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right

from .cache import MemoryCache
from .families import Family
from .linear import ExactProducts, SequenceRows, is_plain_linear, project
from .masks import RawMemoryRows, full_mask


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` [B, H, T, d] by `cos`/`sin` [B or 1, T, d] (the Llama half-split convention)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + rotate_half(x) * sin


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


# -- the step contexts ----------------------------------------------------------------------------
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


@dataclass
class ValidRowsStep:
    """A piece of a window over its cache's valid rows: the keys `[memory entries | window so far | these
    rows]`, which of them each row sees as `seen` says (a prefix and a window mask)."""

    cache: MemoryCache
    seen: KeysSeen
    rows: RawMemoryRows | None = None
    implementation: str = "sdpa"
    dtype: torch.dtype | None = None

    # Never compiled: the cache write and the number of keys change from window to window, so compiled
    # layers (memory/compiled.py) break their graph here. The layer's index is read here, not in the
    # compiled code, so that one graph serves every layer; the output leaves contiguous, one layout.
    @torch.compiler.disable
    def attend(self, attention: MemoryAttention, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> torch.Tensor:
        keys, values = self.cache.update(key, value, attention.layer_idx)  # [B, H_kv, S, d]
        kernel = KERNELS[self.implementation]
        return kernel(query, keys, values, self.seen, attention.scaling, attention.kv_groups).contiguous()


@dataclass
class WholeBufferStep:
    """A decoding step over whole cache buffers: every field a tensor or a constant of the model, so that
    its shapes stay the same token after token and it compiles whole."""

    keys: list[torch.Tensor]  # per layer [B, H_kv, C, d], written in place
    values: list[torch.Tensor]
    write_rows: torch.Tensor  # [T] the buffer rows of the step's rows; [B, T] each sequence its own
    seen: KeysSeen  # its `bias` [T, C], or [B, T, C] each sequence its own
    rows: RawMemoryRows | None  # which of the T rows is the memory token (None: one raw row)
    dtype: torch.dtype
    implementation: str = "sdpa"

    def attend(self, attention: MemoryAttention, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> torch.Tensor:
        keys, values, write_rows = self.keys[attention.layer_idx], self.values[attention.layer_idx], self.write_rows
        if write_rows.dim() == 1:
            keys.index_copy_(2, write_rows, key)
            values.index_copy_(2, write_rows, value)
        else:  # each sequence writes its own rows
            rows = write_rows[:, None, :, None].expand(-1, key.shape[1], -1, key.shape[3])  # [B, H_kv, T, d]
            keys.scatter_(2, rows, key)
            values.scatter_(2, rows, value)
        kernel = KERNELS[self.implementation]
        return kernel(query, keys, values, self.seen, attention.scaling, attention.kv_groups)


@dataclass
class PackedSequencesStep:
    """Several sequences' steps packed into one row axis (batch 1). Sequence `i` owns rows
    `bounds[i]:bounds[i + 1]` and its own context: everything row-wise (norms, projections, MLP) runs once
    over all rows, attention per sequence exactly as it would alone. `rows` marks the memory tokens among
    all packed rows (None: all raw)."""

    steps: list[ValidRowsStep | WholeBufferStep]
    bounds: list[int]
    rows: RawMemoryRows | None = None
    dtype: torch.dtype | None = None

    @torch.compiler.disable  # as `ValidRowsStep.attend`
    def attend(self, attention: MemoryAttention, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> torch.Tensor:
        outputs = []
        for step, start, end in zip(self.steps, self.bounds[:-1], self.bounds[1:], strict=True):
            part = slice(start, end)
            outputs.append(step.attend(attention, query[:, :, part].contiguous(), key[:, :, part].contiguous(),
                                       value[:, :, part]))
        return torch.cat(outputs, dim=1)


@dataclass
class StepRows:
    """A step's rows as the layers take them: raw rows with the piece's memory tokens inserted."""

    hidden: torch.Tensor  # [B, T, D] input states, raw and memory rows in sequence order
    positions: torch.Tensor  # [1, T]
    rows: RawMemoryRows | None  # which rows are memory tokens (None: all raw)
    context: ValidRowsStep | WholeBufferStep

    @property
    def num_rows(self) -> int:
        return self.hidden.shape[1]

    @property
    def num_memory(self) -> int:
        return 0 if self.rows is None else int(self.rows.memory.numel())

    def raw(self, hidden: torch.Tensor) -> torch.Tensor:
        """The raw rows [B, n, ...] of this piece's rows [B, T, ...]."""
        return self.rows.split(hidden)[0] if self.rows is not None else hidden


@dataclass
class PackedStepRows:
    """Several sequences' step rows packed along one row axis (batch 1), ready for the layers.

    Sequences that continue one memory differ in length, so each reaches its memory-token rows
    and its window's end at its own step, at its own positions: instead of padding them to one
    shape, their rows are packed, each layer runs once over all rows, and attention runs per
    sequence over its own cache (`PackedSequencesStep`). Given `sequence_rows` (an exact batch), every linear
    layer rounds each sequence's rows as alone (memory/linear.py): a reply decoded in a batch then equals
    the one decoded alone token for token. Without it, each matrix product is shared by all rows
    (faster where the per-sequence products are slow), and a reply can differ where two tokens
    (nearly) tie."""

    parts: list[StepRows]
    bounds: list[int]  # sequence i owns packed rows bounds[i]:bounds[i + 1]
    hidden: torch.Tensor  # [1, sum T_i, D]
    positions: torch.Tensor  # [1, sum T_i]
    position_embeddings: tuple[torch.Tensor, torch.Tensor]  # cos, sin [1, sum T_i, d]
    context: PackedSequencesStep

    @classmethod
    def of(cls, parts: list[StepRows], rotary: nn.Module, dtype: torch.dtype) -> PackedStepRows:
        bounds, raw_rows, memory_rows = [0], [], []
        for part in parts:
            start, count = bounds[-1], part.num_rows
            if part.rows is None:
                raw_rows.extend(range(start, start + count))
            else:
                raw_rows.extend(start + row for row in part.rows.raw_rows)
                memory_rows.extend(start + row for row in part.rows.memory_rows)
            bounds.append(start + count)
        device = parts[0].hidden.device
        hidden = torch.cat([part.hidden for part in parts], dim=1)  # [1, sum T_i, D]
        positions = torch.cat([part.positions for part in parts], dim=1)  # [1, sum T_i]
        # each sequence's rotary embedding computed as it would be alone, then packed
        embeddings = [rotary(part.hidden, part.positions) for part in parts]
        cos = torch.cat([pair[0] for pair in embeddings], dim=1)
        sin = torch.cat([pair[1] for pair in embeddings], dim=1)
        rows = RawMemoryRows.of(raw_rows, memory_rows, device=device) if memory_rows else None
        context = PackedSequencesStep(steps=[part.context for part in parts], bounds=bounds, rows=rows, dtype=dtype)
        return cls(parts, bounds, hidden, positions, (cos, sin), context)

    def sequence_rows(self, products: ExactProducts) -> SequenceRows:
        """How the packed rows split by sequence, for products that round each one as alone (memory/linear.py):
        all rows, and the raw rows and the memory rows where they are projected apart."""
        splits = {self.bounds[-1]: self.bounds}
        if self.context.rows is not None:
            splits = _add_split(splits, _bounds([part.num_rows - part.num_memory for part in self.parts]))
            splits = _add_split(splits, _bounds([part.num_memory for part in self.parts]))
        return SequenceRows(splits, products)

    def unpack(self, out: torch.Tensor) -> list[torch.Tensor]:
        """The layers' output over the packed rows -> each sequence's raw rows [1, n_i, D]."""
        return [part.raw(out[:, start:end])
                for part, start, end in zip(self.parts, self.bounds[:-1], self.bounds[1:], strict=True)]


def _bounds(counts: list[int]) -> list[int]:
    bounds = [0]
    for count in counts:
        bounds.append(bounds[-1] + count)
    return bounds


def _add_split(splits: dict[int, list[int]], bounds: list[int]) -> dict[int, list[int]]:
    total = bounds[-1]
    if total and total in splits and splits[total] != bounds:
        raise RuntimeError(f"two ways to split {total} packed rows by sequence ({splits[total]} and {bounds}); "
                           "decode these prompts one by one")
    return {**splits, total: bounds} if total else splits


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
        `sequences`, each sequence's rows as alone (memory/linear.py)."""
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
    alone, memory/linear.py) is an argument; transformers keeps the modules, weights and configuration."""
    before_attention, before_mlp = (getattr(layer, name) for name in family.norms)
    hidden = hidden + attend(before_attention(hidden))
    mlp_name, gate, up, down = family.mlp
    mlp = getattr(layer, mlp_name)
    normed = before_mlp(hidden)
    gated = mlp.act_fn(project(getattr(mlp, gate), normed, sequences)) * project(getattr(mlp, up), normed, sequences)
    return hidden + project(getattr(mlp, down), gated, sequences)
