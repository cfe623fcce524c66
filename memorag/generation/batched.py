"""A plain transformers causal LM's rows for the one decode loop (`memorag.runtime.decode_loop.DecodeBatch`).

A decode step of a small model on a CPU is bound by reading the weights, and one pass
over N tokens (one per prompt) reads them once, as a pass over one token does
(benchmarks/batch_decode_step.py measures the saving). `LanguageModelRows` keeps the running
prompts as rows of one left-padded KV cache: a prompt joins between steps (prefilled alone, as a
lone `generate` prefills it) and leaves between steps. Each row reads only its own keys at its
own positions, so its tokens are those of the prompt decoded alone, up to the rounding of a
matrix product shared by the rows (the tests check equality on tiny models). The memory model's
rows are `memorag.memory.decoding.MemoryRows`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from memorag.runtime.cache_argument import cache_kwargs

from .base import GeneratorError


class LanguageModelRows:
    """A transformers causal LM's rows in one left-padded KV cache (transformers' DynamicCache); the
    attention mask hides each row's padding, and each row reads at its own positions."""

    def __init__(self, model):
        self.model = model
        self.lengths: list[int] = []
        self._cache = None
        self._mask: torch.Tensor | None = None  # [B, L]: 1 where a row has a token, 0 on its left padding

    def prompt_ids(self, prompt: Sequence[int]) -> Sequence[int]:
        return prompt

    @torch.inference_mode()
    def prefill(self, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> torch.Tensor:
        """Each prompt read alone, then added as a new last row: their next-token logits [n, V]."""
        return torch.stack([self._add(prompt) for prompt in prompts])

    def _add(self, prompt: Sequence[int]) -> torch.Tensor:
        if not prompt:
            raise GeneratorError("a prompt to decode needs at least one token")
        from transformers import DynamicCache

        ids = torch.tensor([list(prompt)], dtype=torch.long, device=self._device())
        cache = DynamicCache()
        output = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True, logits_to_keep=1,
                            **cache_kwargs(cache))  # the last position's logits only, as `generate` asks
        self._append(cache, torch.ones_like(ids))
        self.lengths.append(len(prompt))
        return output.logits[0, -1]

    def remove(self, index: int) -> None:
        self.lengths.pop(index)
        self._select([i for i in range(len(self.lengths) + 1) if i != index])

    @torch.inference_mode()
    def decode_step(self, tokens: list[int]) -> torch.Tensor:
        assert self._mask is not None
        device = self._device()
        ids = torch.tensor([[token] for token in tokens], dtype=torch.long, device=device)
        positions = torch.tensor([[length] for length in self.lengths], dtype=torch.long, device=device)
        self._mask = torch.cat([self._mask, torch.ones_like(ids)], dim=1)
        output = self.model(input_ids=ids, attention_mask=self._mask, position_ids=positions, use_cache=True,
                            **cache_kwargs(self._cache))
        self.lengths = [length + 1 for length in self.lengths]
        return output.logits[:, -1]

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _append(self, cache, mask: torch.Tensor) -> None:
        """Add one row's cache and mask to the batch, left-padding the shorter side."""
        if self._cache is None:
            self._cache, self._mask = cache, mask
            return
        assert self._mask is not None
        width = max(self._mask.shape[1], mask.shape[1])
        for mine, theirs in zip(self._cache.layers, cache.layers, strict=True):
            mine.keys = torch.cat([_pad_left(mine.keys, width), _pad_left(theirs.keys, width)], dim=0)
            mine.values = torch.cat([_pad_left(mine.values, width), _pad_left(theirs.values, width)], dim=0)
        self._mask = torch.cat([_pad_left(self._mask, width, dim=1), _pad_left(mask, width, dim=1)], dim=0)

    def _select(self, keep: list[int]) -> None:
        """Keep the rows `keep` and cut the padding every kept row has on its left."""
        if not keep:
            self._cache = self._mask = None
            return
        assert self._mask is not None
        mask = self._mask[keep]
        start = int((mask.sum(0) == 0).long().cumprod(0).sum())  # columns of padding for every row
        index = torch.tensor(keep, device=mask.device)
        for layer in self._cache.layers:
            layer.keys = layer.keys.index_select(0, index)[:, :, start:].contiguous()
            layer.values = layer.values.index_select(0, index)[:, :, start:].contiguous()
        self._mask = mask[:, start:].contiguous()


def _pad_left(tensor: torch.Tensor, width: int, dim: int = 2) -> torch.Tensor:
    """`tensor` with zeros added before its entries along `dim` up to `width`."""
    missing = width - tensor.shape[dim]
    if missing == 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)
