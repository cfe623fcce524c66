"""Memory-aware attention wrapping a frozen base attention module.

`MemoryAttention` keeps the family's own attention as `base_layer` (frozen) and adds
the memory projections (`memory.q/k/v[/o]`, copies of the base projections). It holds
no state: each call receives a `StepContext` (through the decoder layer's **kwargs)
naming the cache to write to and which rows it carries. Without a context it is the
base attention, untouched, so a patched model still runs as plain transformers.

`attend` is the one dispatch point for kernels (SDPA, FlashAttention 2, eager).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .cache import MemoryCache
from .families import Family


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` [B, H, T, d] by `cos`/`sin` [B or 1, T, d] (the Llama half-split convention)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return x * cos + rotate_half(x) * sin


@dataclass
class StepContext:
    """What one forward step over some rows needs to know; shared by every layer.

    Keys are `[prefix | tail]`: the first `prefix` keys are visible to every row of the
    step; `mask` [T, tail] (True = may attend) says which tail keys each row sees, and
    `None` means causal aligned to the last key (the step's own rows come last).
    """

    cache: MemoryCache
    memory_rows: bool  # True: the rows are memory tokens (memory projections)
    prefix: int
    mask: torch.Tensor | None = None
    implementation: str = "sdpa"
    dtype: torch.dtype | None = None  # the cache's dtype (the base model's), so all rows agree


def causal_end_mask(num_queries: int, num_keys: int, device: torch.device) -> torch.Tensor:
    """[Tq, S] bool: query i sees keys up to `S - Tq + i` (causal, aligned to the last key)."""
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(num_keys - num_queries)


def memory_rows_mask(scheme: str, window: int, offsets: list[int], ratio: int, device: torch.device) -> torch.Tensor:
    """[m, L + m] bool: which of a complete window's rows each of its memory rows sees.

    Keys are [the window's raw rows | the window's memory rows] (memory entries come
    before them and are visible to all). Memory row i follows raw row `offsets[i]` and
    always sees itself; `full-coverage` is plain causal in the interleaved order (raw
    rows up to its own, earlier memory rows of the window); `step-expansion` sees the
    raw rows up to its own (the first (i+1) * ratio) and no other memory row of the
    window; `segmentation` sees only its own `ratio` raw rows.
    """
    m = len(offsets)
    follows = torch.tensor(offsets, device=device)[:, None]  # [m, 1]
    raw = torch.arange(window, device=device)[None, :]  # [1, L]
    if scheme == "segmentation":
        raw_visible = (raw <= follows) & (raw > follows - ratio)
    else:
        raw_visible = raw <= follows
    rows = torch.arange(m, device=device)
    if scheme == "full-coverage":
        memory_visible = rows[None, :] <= rows[:, None]
    else:
        memory_visible = rows[None, :] == rows[:, None]
    return torch.cat([raw_visible, memory_visible], dim=1)


def _full_mask(num_queries: int, prefix: int, tail: int, mask: torch.Tensor | None, device) -> torch.Tensor:
    tail_mask = mask if mask is not None else causal_end_mask(num_queries, tail, device)
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


def _single_query_attention(query, key, value, scale: float) -> torch.Tensor:
    """One query row per sequence seeing every key (decoding): grouped heads folded, no mask.

    On CPU this is 10-20x faster than SDPA's bf16 kernel for a single query row.
    """
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    folded = query.reshape(batch, kv_heads, heads // kv_heads, dim)  # [B, H_kv, g, d]
    scores = torch.matmul(folded, key.transpose(2, 3)).float() * scale  # [B, H_kv, g, S]
    weights = torch.softmax(scores, dim=-1).to(value.dtype)
    return torch.matmul(weights, value).reshape(batch, 1, heads, dim)  # [B, 1, H, d]


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
        return _single_query_attention(query, key, value, scale)
    needs_grad = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
    if prefix > 0 and num_queries > 1 and query.device.type == "cpu" and not needs_grad:
        return _split_attention(query, key, value, prefix, mask, scale)
    is_causal = mask is None and num_queries == num_keys
    full = None
    if not is_causal and not (mask is None and num_queries == 1):
        full = _full_mask(num_queries, prefix, tail, mask, query.device)
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=full, is_causal=is_causal, scale=scale, enable_gqa=groups > 1
    )
    return out.transpose(1, 2)


class MemoryAttention(nn.Module):
    """A base attention module plus the memory tokens' own projections."""

    def __init__(self, base_layer: nn.Module, family: Family, memory_params: str) -> None:
        super().__init__()
        self.base_layer = base_layer
        q_name, k_name, v_name, o_name = family.projections
        names = {"q": q_name, "k": k_name, "v": v_name}
        if memory_params == "qkvo":
            names["o"] = o_name
        self.memory = nn.ModuleDict({short: copy.deepcopy(getattr(base_layer, name)) for short, name in names.items()})
        self.memory.requires_grad_(True)
        self.projection_names = family.projections
        self.qk_norms = family.qk_norms
        self.layer_idx: int = base_layer.layer_idx
        self.head_dim: int = base_layer.head_dim
        self.scaling: float = base_layer.scaling

    def _projection(self, short: str, memory_rows: bool) -> nn.Module:
        if memory_rows and short in self.memory:
            return self.memory[short]
        return getattr(self.base_layer, self.projection_names["qkvo".index(short)])

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        memory_step: StepContext | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        if memory_step is None:
            return self.base_layer(
                hidden_states=hidden_states,
                position_embeddings=position_embeddings,
                attention_mask=attention_mask,
                **kwargs,
            )
        batch, rows, _ = hidden_states.shape
        shape = (batch, rows, -1, self.head_dim)
        memory_rows = memory_step.memory_rows
        dtype = memory_step.dtype or hidden_states.dtype  # memory projections may be kept in fp32
        query = self._projection("q", memory_rows)(hidden_states).view(shape).to(dtype)  # [B, T, H, d]
        key = self._projection("k", memory_rows)(hidden_states).view(shape).to(dtype)  # [B, T, H_kv, d]
        value = self._projection("v", memory_rows)(hidden_states).view(shape).transpose(1, 2).to(dtype)
        if self.qk_norms is not None:
            query = getattr(self.base_layer, self.qk_norms[0])(query)
            key = getattr(self.base_layer, self.qk_norms[1])(key)
        query, key = query.transpose(1, 2), key.transpose(1, 2)  # [B, H(_kv), T, d]
        cos, sin = position_embeddings
        query = apply_rope(query, cos, sin)
        cache = memory_step.cache
        if cache.rotated_keys:
            key = apply_rope(key, cos, sin)
        keys, values = cache.write(self.layer_idx, key, value)  # [B, H_kv, S, d]
        keys = cache.read_keys(keys)
        out = attend(query, keys, values, memory_step.prefix, memory_step.mask, memory_step.implementation,
                     self.scaling)
        out = out.reshape(batch, rows, -1)
        return self._projection("o", memory_rows)(out), None
