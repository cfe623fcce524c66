"""A model of the supported families without memory, run by our own decoder layer over key/value slots
(docs/memory-model.md, "Decoding"): what the one loop decodes a plain generator through.

transformers keeps the configuration, the weights (each layer's norms, projections and MLP, called as its
own modules, so a reader adapter merged into copies of projections is read as it is) and the rotary table;
the layer's forward is ours (`attention.decoder_block`, the memory model's block, given this decoder's
attention), and the option the families differ in (Qwen3's per-head q/k norms) is read from `families.py`. Sequences are the slots of one buffer per layer (`KVSlots`, [S, H_kv, C, d]): a
sequence's keys are its slot's first columns, at its own positions 0, 1, ..., so a decoding step of
several sequences is one pass over the layers, each sequence attending over its own columns (an additive
bias hides the rest), and each step writes one column per sequence in place: the cache is never copied,
where a concatenating cache (transformers' `DynamicCache`) copies all of it at every token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .attention import KeysSeen, apply_rope, decoder_block, head_groups, sdpa
from .cache import bucketed
from .families import FAMILIES, Family, UnsupportedModelError, family_of
from .schedule import own_columns_bias

# (layer index, query [B, H, T, d], key and value [B, H_kv, T, d]) -> [B, T, H, d]: where a layer's new keys
# and values go and what its queries attend over
Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def decodes_plainly(model: nn.Module) -> bool:
    """Whether `model` is a causal LM `PlainDecoder` runs: a family of `families.py` with every layer
    attending over all earlier tokens (a sliding window shorter than its reach keeps transformers' decoding)."""
    if getattr(model.config, "model_type", None) not in FAMILIES:
        return False
    try:
        family_of(model.config)
    except UnsupportedModelError:
        return False
    return True


class KVSlots:
    """Keys and values of up to `slots` sequences: per layer [slots, H_kv, capacity, d], allocated once and
    grown (with a copy) only when a sequence joins that needs more slots or columns."""

    def __init__(self, num_layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device):
        self.shape = (kv_heads, head_dim)
        self.dtype, self.device = dtype, device
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.num_layers = num_layers

    @property
    def slots(self) -> int:
        return self.keys[0].shape[0] if self.keys else 0

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2] if self.keys else 0

    def ensure(self, slots: int, capacity: int) -> None:
        """Room for `slots` sequences of `capacity` columns each; the columns held are kept."""
        if slots <= self.slots and capacity <= self.capacity:
            return
        slots, capacity = max(slots, self.slots), bucketed(max(capacity, self.capacity))
        kv_heads, head_dim = self.shape
        grown = [torch.zeros(slots, kv_heads, capacity, head_dim, dtype=self.dtype, device=self.device)
                 for _ in range(2 * self.num_layers)]
        for old, new in zip(self.keys + self.values, grown, strict=False):
            new[: old.shape[0], :, : old.shape[2]] = old
        self.keys, self.values = grown[: self.num_layers], grown[self.num_layers :]

    def move(self, source: int, target: int, columns: int) -> None:
        """Copy slot `source`'s first `columns` columns into slot `target` (a sequence changing slots)."""
        for tensor in self.keys + self.values:
            tensor[target, :, :columns] = tensor[source, :, :columns]


class PlainDecoder:
    """The decoder layers of a supported family's causal LM, run by us (see the module's docstring)."""

    def __init__(self, model: nn.Module):
        if not decodes_plainly(model):
            raise UnsupportedModelError(f"{getattr(model.config, 'model_type', None)!r} is not decoded by the "
                                        "plain decoder; decode it with transformers' generate")
        self.family: Family = family_of(model.config)
        family = self.family
        self.layers = model.get_submodule(family.layers)
        self.embed_tokens = model.get_submodule(family.embed_tokens)
        self.final_norm = model.get_submodule(family.final_norm)
        self.rotary = model.get_submodule(family.rotary)
        self.lm_head = model.get_submodule(family.lm_head)
        first = self.attention(0)
        self.head_dim, self.scaling = int(first.head_dim), float(first.scaling)
        self.kv_heads, self.groups = head_groups(model.config)

    def attention(self, index: int) -> nn.Module:
        """Layer `index`'s attention module as the family has it (inside the memory model's wrapper, the
        base one: a memory model's own base model is decoded without memory so)."""
        module = getattr(self.layers[index], self.family.attention)
        return getattr(module, "base_layer", module)

    @property
    def device(self) -> torch.device:
        return self.embed_tokens.weight.device

    def new_slots(self) -> KVSlots:
        return KVSlots(len(self.layers), self.kv_heads, self.head_dim, self.embed_tokens.weight.dtype, self.device)

    def prefill(self, slots: KVSlots, slot: int, token_ids: Sequence[int]) -> torch.Tensor:
        """Read a prompt into slot `slot` (its columns 0..n-1), attending over its own tokens alone; the
        next-token logits [V]."""
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self.device)  # [1, n]
        positions = torch.arange(ids.shape[1], device=self.device)[None]

        def attend(index: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
            slots.keys[index][slot, :, : key.shape[2]] = key[0]
            slots.values[index][slot, :, : key.shape[2]] = value[0]
            return sdpa(query, key, value, KeysSeen(), self.scaling, self.groups)  # causal over its own rows

        return self.logits(self.forward(ids, positions, attend))[0]

    def decode_step(self, slots: KVSlots, tokens: Sequence[int], lengths: Sequence[int]) -> torch.Tensor:
        """Read `tokens[s]` into slot s (s = 0..n-1) at column and position `lengths[s]`, every slot in one
        pass; the next-token logits [n, V]."""
        count, device = len(tokens), self.device
        ids = torch.tensor([[token] for token in tokens], dtype=torch.long, device=device)  # [n, 1]
        columns = torch.tensor(list(lengths), dtype=torch.long, device=device)  # [n]
        seen = max(lengths) + 1
        bias = KeysSeen(bias=own_columns_bias(columns, seen, slots.dtype)[:, None])  # [n, 1, seen]
        rows = torch.arange(count, device=device)

        def attend(index: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
            keys, values = slots.keys[index], slots.values[index]
            keys[rows, :, columns] = key[:, :, 0]
            values[rows, :, columns] = value[:, :, 0]
            return sdpa(query, keys[:count, :, :seen], values[:count, :, :seen], bias, self.scaling, self.groups)

        return self.logits(self.forward(ids, columns[:, None], attend))

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, attend: Attend) -> torch.Tensor:
        """Token ids [B, T] at `positions` [B, T] through every layer; the last hidden states [B, T, D]."""
        hidden = self.embed_tokens(ids)
        cos, sin = self.rotary(hidden, positions)  # [B, T, d]
        for index, layer in enumerate(self.layers):
            hidden = decoder_block(self.family, layer, hidden,
                                   lambda normed, index=index: self._attention(index, normed, cos, sin, attend))
        return hidden

    def _attention(self, index: int, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   attend: Attend) -> torch.Tensor:
        module = self.attention(index)
        q_name, k_name, v_name, o_name = self.family.projections
        batch, length, _ = hidden.shape
        shape = (batch, length, -1, self.head_dim)
        query = getattr(module, q_name)(hidden).view(shape)  # [B, T, H, d]
        key = getattr(module, k_name)(hidden).view(shape)
        value = getattr(module, v_name)(hidden).view(shape).transpose(1, 2)  # [B, H_kv, T, d]
        if self.family.qk_norms is not None:
            query = getattr(module, self.family.qk_norms[0])(query)
            key = getattr(module, self.family.qk_norms[1])(key)
        query = apply_rope(query.transpose(1, 2), cos, sin)
        key = apply_rope(key.transpose(1, 2), cos, sin)
        out = attend(index, query, key, value)  # [B, T, H, d]
        return getattr(module, o_name)(out.reshape(batch, length, -1))

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The last row's logits [B, V] of hidden states [B, T, D]."""
        return self.lm_head(self.final_norm(hidden[:, -1]))
