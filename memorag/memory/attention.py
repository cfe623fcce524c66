"""Memory-aware attention wrapping a frozen base attention module.

`MemoryAttention` keeps the family's own attention as `base_layer` (frozen) and adds
the memory projections (`memory.q/k/v[/o]`, copies of the base projections). It holds
no state: each call receives a `StepContext` (through the decoder layer's **kwargs)
naming the cache to write to and which of the step's rows are memory tokens (raw and
memory rows come interleaved, in sequence order; raw rows use the base projections,
memory rows the memory projections, each computed only for its own rows). Without a
context it is the base attention, untouched, so a patched model still runs as plain
transformers.

`attend` is the one dispatch point for kernels (SDPA, FlashAttention 2, eager); a decoding
step's attention over whole cache buffers goes through `attend_bucket` (memory/buffer_step.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right

from .cache import MemoryCache
from .families import Family
from .linear import is_plain_linear


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` [B, H, T, d] by `cos`/`sin` [B or 1, T, d] (the Llama half-split convention)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + rotate_half(x) * sin


@dataclass
class RowSplit:
    """Which rows of a step are raw tokens and which are memory tokens.

    `raw` and `memory` are row indices [n] and [m]; `order` [n + m] puts
    `cat([raw rows, memory rows])` back into sequence order. When the rows are whole
    groups of `group` raw rows followed by one memory row (a whole window, or any piece
    that starts and ends at a group boundary: the common case), they are split and merged
    by reshaping instead of gathering, which is cheaper forward and backward.
    """

    raw: torch.Tensor
    memory: torch.Tensor
    order: torch.Tensor
    group: int | None = None  # raw rows per memory row when the rows are regular groups
    raw_rows: tuple[int, ...] = ()  # `raw` and `memory` as the host knows them (never read back from a device)
    memory_rows: tuple[int, ...] = ()

    @classmethod
    def of(cls, raw_rows: list[int], memory_rows: list[int], device: torch.device) -> RowSplit:
        raw = torch.tensor(raw_rows, dtype=torch.long, device=device)
        memory = torch.tensor(memory_rows, dtype=torch.long, device=device)
        order = torch.argsort(torch.cat([raw, memory]))
        group = len(raw_rows) // len(memory_rows) if memory_rows else None
        regular = group and len(raw_rows) == group * len(memory_rows) and memory_rows == [
            j * (group + 1) + group for j in range(len(memory_rows))]
        return cls(raw, memory, order, group if regular else None, tuple(raw_rows), tuple(memory_rows))

    def split(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, T, ...] -> raw rows [B, n, ...], memory rows [B, m, ...]."""
        if self.group is None:
            return rows.index_select(1, self.raw), rows.index_select(1, self.memory)
        batch, rest = rows.shape[0], rows.shape[2:]
        grouped = rows.view(batch, -1, self.group + 1, *rest)  # [B, m, group + 1, ...]
        return grouped[:, :, : self.group].reshape(batch, -1, *rest), grouped[:, :, self.group]

    def merge(self, raw: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """Raw rows [B, n, ...] and memory rows [B, m, ...] -> [B, n + m, ...] in sequence order."""
        if self.group is None:
            return torch.cat([raw, memory], dim=1).index_select(1, self.order)
        batch, groups, rest = memory.shape[0], memory.shape[1], memory.shape[2:]
        grouped = torch.cat([raw.view(batch, groups, self.group, *rest), memory.unsqueeze(2)], dim=2)
        return grouped.view(batch, -1, *rest)


@dataclass
class StepContext:
    """What one forward step over some rows needs to know; shared by every layer.

    Keys are `[prefix | tail]`: the first `prefix` keys (memory entries) are visible to
    every row of the step; `mask` [T, tail] (True = may attend) says which tail keys
    (the current window's rows) each row sees, and `None` means causal aligned to the
    last key (the step's own rows come last). `rows` says which rows are memory tokens
    (None: all raw).
    """

    cache: MemoryCache
    prefix: int
    rows: RowSplit | None = None
    mask: torch.Tensor | None = None
    implementation: str = "sdpa"
    dtype: torch.dtype | None = None  # the cache's dtype (the base model's), so all rows agree

    @property
    def rotated_keys(self) -> bool:
        return self.cache.rotated_keys

    compiles_whole = False  # its attention runs eager under compiled layers (`attend_eager`)

    def attend(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               scale: float) -> torch.Tensor:
        """Write this step's `key`/`value` [B, H_kv, T, d] to the cache and attend `query` [B, H, T, d]
        over it; [B, T, H, d]."""
        keys, values = self.cache.write(layer, key, value)  # [B, H_kv, S, d]
        keys = self.cache.read_keys(keys)
        return attend(query, keys, values, self.prefix, self.mask, self.implementation, scale)


@dataclass
class PackedStep:
    """One forward step over several sequences' rows packed into one row axis (batch 1).

    Sequence `i` owns rows `bounds[i]:bounds[i + 1]` and its own `StepContext` (its own
    cache, prefix and mask): everything row-wise (norms, projections, MLP) runs once over
    all rows, attention runs per sequence exactly as it would alone. `rows` marks the
    memory tokens among all packed rows (None: all raw).
    """

    steps: list  # StepContext or BufferStep (memory/buffer_step.py), one per sequence
    bounds: list[int]
    rows: RowSplit | None = None
    dtype: torch.dtype | None = None

    @property
    def rotated_keys(self) -> bool:
        return all(step.rotated_keys for step in self.steps)

    compiles_whole = False  # as StepContext

    def attend(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               scale: float) -> torch.Tensor:
        outputs = []
        for step, start, end in zip(self.steps, self.bounds[:-1], self.bounds[1:], strict=True):
            part = slice(start, end)
            outputs.append(step.attend(layer, query[:, :, part].contiguous(), key[:, :, part].contiguous(),
                                       value[:, :, part], scale))
        return torch.cat(outputs, dim=1)


def causal_end_mask(num_queries: int, num_keys: int, device: torch.device) -> torch.Tensor:
    """[Tq, S] bool: query i sees keys up to `S - Tq + i` (causal, aligned to the last key)."""
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(num_keys - num_queries)


def window_mask(scheme: str, ratio: int, rows_before: int, num_rows: int, device: torch.device) -> torch.Tensor | None:
    """[num_rows, rows_before + num_rows] bool: which rows of the current window each new row sees.

    Window row t is a memory token when `(t + 1) % (ratio + 1) == 0`. `full-coverage`
    is plain causal (None: no mask needed). Under `step-expansion` and `segmentation` a
    raw row sees the raw rows before it and no memory row of its window; memory token
    j sees itself and the raw rows before it (`step-expansion`) or only its own `ratio`
    raw rows (`segmentation`).
    """
    if scheme == "full-coverage":
        return None
    keys = torch.arange(rows_before + num_rows, device=device)  # [S]
    return _window_visibility(scheme, ratio, keys, rows_before, num_rows)


def bucket_bias(scheme: str, ratio: int, prefix: int, rows_before: int, num_rows: int, capacity: int,
                device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """[num_rows, capacity] additive bias (0: seen, -inf: not) over a whole cache buffer, for a
    decoding step's new rows.

    Rows `[:prefix]` (memory entries) are seen by every row; the window's rows as `window_mask`
    says; rows past the new ones (not yet written, or left over from a compacted window) by
    none. Only scalars change from token to token, never a shape.
    """
    hidden = torch.full((num_rows, capacity), float("-inf"), dtype=dtype, device=device)  # [T, C]
    if scheme == "full-coverage":  # row t sees buffer rows 0 .. prefix + rows_before + t
        return hidden.triu_(prefix + rows_before + 1)
    keys = torch.arange(capacity, device=device) - prefix  # [C] window row of each buffer row (< 0: entry)
    seen = (keys < 0)[None, :] | _window_visibility(scheme, ratio, keys, rows_before, num_rows)  # [T, C]
    return hidden.masked_fill_(seen, 0.0)


def _window_visibility(scheme: str, ratio: int, keys: torch.Tensor, rows_before: int, num_rows: int) -> torch.Tensor:
    """[T, S] bool: window rows `keys` [S] (negative ones: not in the window) seen by the new rows
    `rows_before .. rows_before + T - 1`."""
    queries = torch.arange(rows_before, rows_before + num_rows, device=keys.device)[:, None]  # [T, 1]
    causal = (keys[None, :] >= 0) & (keys[None, :] <= queries)  # [T, S]
    if scheme == "full-coverage":
        return causal
    key_is_memory = (keys + 1) % (ratio + 1) == 0  # [S]
    query_is_memory = (queries + 1) % (ratio + 1) == 0  # [T, 1]
    causal_raw = causal & ~key_is_memory[None, :]  # [T, S]
    if scheme == "segmentation":
        group = keys // (ratio + 1)  # the memory token each raw row belongs to
        causal_raw = causal_raw & (~query_is_memory | (group[None, :] == queries // (ratio + 1)))
    return causal_raw | (keys[None, :] == queries)


def _full_mask(num_queries: int, prefix: int, tail: int, mask: torch.Tensor | None, device) -> torch.Tensor:
    """[Tq, prefix + tail] bool: every prefix key, then `mask` (None: causal aligned to the last key)."""
    if mask is None:
        return _causal_full_mask(num_queries, prefix, tail, torch.device(device))
    if prefix == 0:
        return mask
    return torch.cat([torch.ones(num_queries, prefix, dtype=torch.bool, device=device), mask], dim=1)


@lru_cache(maxsize=2)
def _causal_full_mask(num_queries: int, prefix: int, tail: int, device: torch.device) -> torch.Tensor:
    """`_full_mask` without a window mask, built by a step's first layer and reused by the others (and
    by the next step of the same shape); shared, so never written into; built outside inference mode
    so a step that autograd records may use it too."""
    with torch.inference_mode(False), torch.no_grad():
        tail_mask = causal_end_mask(num_queries, tail, device)  # [Tq, tail]
        if prefix == 0:
            return tail_mask
        return torch.cat([torch.ones(num_queries, prefix, dtype=torch.bool, device=device), tail_mask], dim=1)


def _cpu_flash(query, key, value, causal: bool, mask: torch.Tensor | None, scale: float):
    """PyTorch's fused CPU attention, returning the output and its log-sum-exp."""
    float_mask = None
    if mask is not None:
        float_mask = torch.zeros(mask.shape, dtype=query.dtype, device=query.device)
        float_mask.masked_fill_(~mask, float("-inf"))
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, 0.0, causal, attn_mask=float_mask, scale=scale
    )


def _split_attention(query, key, value, prefix: int, mask, scale: float) -> torch.Tensor:
    """Prefix keys unmasked + tail keys causal/masked, merged by log-sum-exp (CPU inference).

    The prefix (the memory, often most of the keys) needs no mask, and its query
    groups are folded into the query rows so grouped keys are never repeated.
    """
    batch, heads, num_queries, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    folded = query.reshape(batch, kv_heads, groups * num_queries, dim)
    out_prefix, lse_prefix = _cpu_flash(folded, key[:, :, :prefix], value[:, :, :prefix], False, None, scale)
    out_prefix = out_prefix.reshape(batch, heads, num_queries, dim)
    lse_prefix = lse_prefix.reshape(batch, heads, num_queries)
    tail_key = key[:, :, prefix:].repeat_interleave(groups, dim=1)
    tail_value = value[:, :, prefix:].repeat_interleave(groups, dim=1)
    causal = mask is None and tail_key.shape[2] == num_queries
    if mask is None and not causal:
        mask = causal_end_mask(num_queries, tail_key.shape[2], query.device)
    out_tail, lse_tail = _cpu_flash(query, tail_key, tail_value, causal, mask, scale)
    lse = torch.logaddexp(lse_prefix, lse_tail)  # [B, H, Tq]
    weight_prefix = (lse_prefix - lse).exp().unsqueeze(-1).to(query.dtype)
    weight_tail = (lse_tail - lse).exp().unsqueeze(-1).to(query.dtype)
    return (out_prefix * weight_prefix + out_tail * weight_tail).transpose(1, 2)


def _folded_attention(query, key, value, scale: float, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A few query rows per sequence (decoding) as a plain matmul-softmax, grouped heads folded into
    the rows so grouped keys are never repeated; `bias` [Tq, S] added to the scores (None: every key
    seen). [B, Tq, H, d].

    On CPU this is 10-20x faster than SDPA's bf16 kernel for a single query row.
    """
    batch, heads, num_queries, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    folded = query.reshape(batch, kv_heads, groups * num_queries, dim)  # [B, H_kv, g * Tq, d]
    scores = torch.matmul(folded, key.transpose(2, 3)).float() * scale  # [B, H_kv, g * Tq, S]
    if bias is not None:  # row g_i * Tq + t of the folded rows takes bias[t] (bias[b, t]: each sequence its own)
        bias = bias[:, None, None] if bias.dim() == 3 else bias  # [B, 1, 1, Tq, S]
        scores = (scores.view(batch, kv_heads, groups, num_queries, -1) + bias).view(scores.shape)
    weights = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(weights, value).reshape(batch, heads, num_queries, dim)  # [B, H, Tq, d]
    return out.transpose(1, 2)


def attend_bucket(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, bias: torch.Tensor,
                  scale: float, grouped: bool) -> torch.Tensor:
    """A decoding step's dispatch: `query` [B, H, Tq, d] over whole cache buffers `key`/`value`
    [B, H_kv, C, d] with the additive `bias` [Tq, C] (`bucket_bias`), or [B, Tq, C] (each sequence its
    own). Every shape depends on the capacity C, not on the length, so kernels (and a CUDA backend's
    execution plans) are reused token after token. CPU: the folded matmul-softmax; elsewhere one SDPA call with the bias as its mask. `grouped`:
    fewer key/value heads than query heads, given as a constant (compared here under torch.compile with
    dynamic shapes, the head counts give a SymBool that SDPA refuses). Returns [B, Tq, H, d]."""
    if query.device.type == "cpu":
        return _folded_attention(query, key, value, scale, bias)
    if bias.dim() == 3:
        bias = bias[:, None]  # [B, 1, Tq, C]: every head of a sequence
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=bias, scale=scale, enable_gqa=grouped)
    return out.transpose(1, 2)


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    prefix: int,
    mask: torch.Tensor | None,
    implementation: str,
    scale: float,
) -> torch.Tensor:
    """The one kernel dispatch point: `query` [B, H, Tq, d] over `key`/`value` [B, H_kv, S, d].

    Keys `[:prefix]` are visible to every query; `mask` covers the rest (None: causal
    aligned to the last key). Returns [B, Tq, H, d].
    - `flash_attention_2` (CUDA): its causal mask is aligned to the last key, which is
      exactly the `mask=None` case; an explicit mask goes to SDPA.
    - `sdpa`: on CPU, a single query row (decoding) is a plain folded matmul-softmax;
      on CPU without autograd, a prefix is attended unmasked and merged with
      the tail by log-sum-exp (`_split_attention`); otherwise one SDPA call with
      `is_causal` when the keys are exactly the queries' own rows, else a boolean mask.
      On CUDA the causal mask aligned to the last key (`mask=None`: a window after its
      memory, in memorizing and training) is torch's `causal_lower_right`, which SDPA
      runs as flash attention's own causal mask (fp16/bf16; fp32 takes the
      memory-efficient kernel, or the boolean mask with grouped heads): no mask tensor,
      and on an H200 both a training step and memorizing ran faster than with the
      boolean mask's cuDNN kernel (benchmarks/results/profile-h200-2026-11-26/).
    - `eager`: plain matmul-softmax with an explicit mask, for debugging.
    """
    num_queries, num_keys = query.shape[2], key.shape[2]
    tail = num_keys - prefix
    groups = query.shape[1] // key.shape[1]
    if implementation == "flash_attention_2" and mask is None and query.is_cuda:
        from flash_attn import flash_attn_func

        return flash_attn_func(
            query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), softmax_scale=scale, causal=True
        )
    if implementation == "eager":
        full = _full_mask(num_queries, prefix, tail, mask, query.device)
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
        scores = torch.matmul(query, key.transpose(2, 3)) * scale  # [B, H, Tq, S]
        scores = scores.masked_fill(~full, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        return torch.matmul(weights, value).transpose(1, 2)
    if num_queries == 1 and mask is None and query.device.type == "cpu":
        return _folded_attention(query, key, value, scale)
    needs_grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
    if prefix > 0 and num_queries > 1 and query.device.type == "cpu" and not needs_grad:
        return _split_attention(query, key, value, prefix, mask, scale)
    is_causal = mask is None and num_queries == num_keys
    full = None
    if mask is None and 1 < num_queries < num_keys and query.is_cuda:
        full = causal_lower_right(num_queries, num_keys)  # the same mask, as flash attention's own causal
    elif not is_causal and not (mask is None and num_queries == 1):
        full = _full_mask(num_queries, prefix, tail, mask, query.device)
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=full, is_causal=is_causal, scale=scale, enable_gqa=groups > 1
    )
    return out.transpose(1, 2)


@torch.compiler.disable
def attend_eager(context: StepContext | PackedStep, attention: MemoryAttention, query: torch.Tensor,
                 key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """`context.attend` for a window's rows, never compiled: the cache write and the number of keys change
    from window to window, so compiled layers (memory/compiled_windows.py) break their graph here and
    run it eager. The layer's index is read here, not in the compiled code, so that one graph serves
    every layer; the output is made contiguous, so the graph after it sees one layout. [B, T, H, d]."""
    return context.attend(attention.layer_idx, query, key, value, attention.scaling).contiguous()


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

    def _project(self, short: str, hidden: torch.Tensor, parts, rows: RowSplit | None) -> torch.Tensor:
        """Project `hidden` [B, T, D] with the base projection `short`, memory rows with the memory one."""
        base = getattr(self.base_layer, self.projection_names["qkvo".index(short)])
        if rows is None or short not in self.memory:
            return base(hidden)
        raw, memory = parts
        return rows.merge(base(raw), self.memory[short](memory))

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        memory_step: StepContext | PackedStep | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        if memory_step is None:
            return self.base_layer(
                hidden_states=hidden_states,
                position_embeddings=position_embeddings,
                attention_mask=attention_mask,
                **kwargs,
            )
        batch, num_rows, _ = hidden_states.shape
        shape = (batch, num_rows, -1, self.head_dim)
        rows = memory_step.rows
        parts = rows.split(hidden_states) if rows is not None else None
        dtype = memory_step.dtype or hidden_states.dtype  # memory projections may be kept in fp32
        query = self._project("q", hidden_states, parts, rows).view(shape).to(dtype)  # [B, T, H, d]
        key = self._project("k", hidden_states, parts, rows).view(shape).to(dtype)  # [B, T, H_kv, d]
        value = self._project("v", hidden_states, parts, rows).view(shape).transpose(1, 2).to(dtype)
        if self.qk_norms is not None:
            query = getattr(self.base_layer, self.qk_norms[0])(query)
            key = getattr(self.base_layer, self.qk_norms[1])(key)
        query, key = query.transpose(1, 2), key.transpose(1, 2)  # [B, H(_kv), T, d]
        cos, sin = position_embeddings
        query = apply_rope(query, cos, sin)
        if memory_step.rotated_keys:
            key = apply_rope(key, cos, sin)
        if memory_step.compiles_whole:  # a decoding step (memory/buffer_step.py)
            out = memory_step.attend(self.layer_idx, query, key, value, self.scaling)  # [B, T, H, d]
        else:
            out = attend_eager(memory_step, self, query, key, value)
        out = out.reshape(batch, num_rows, -1)
        out_parts = rows.split(out) if rows is not None and "o" in self.memory else None
        return self._project("o", out, out_parts, rows), None
