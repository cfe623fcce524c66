"""Greedy decoding of several prompts together: one forward pass gives every running prompt its next token.

A decode step of a small model on a CPU is bound by reading the weights, and one pass
over N tokens (one per prompt) reads them once, as a pass over one token does
(benchmarks/batch_decode_step.py measures the saving). `DecodeBatch` keeps the running
prompts as rows of one batch: a prompt joins between steps (prefilled alone, as a lone
`generate` prefills it) and leaves between steps when it stops, reaches its token budget or
is dropped by its caller. Each row reads only its own keys at its own positions, so its
tokens are those of the prompt decoded alone, up to the rounding of a matrix product shared
by the rows (the tests check equality on tiny models).

The rows' model state is kept by an engine (`BatchRows`): `LanguageModelRows` here, for a
transformers causal LM, and `memorag.memory.batch_rows.MemoryRows` for the memory model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from memorag.runtime.cache_argument import cache_kwargs

from .base import GeneratorError


class BatchRows(Protocol):
    """The model state of a batch's rows, in the order they joined."""

    def add(self, prompt: Any, max_new_tokens: int) -> torch.Tensor:
        """Prefill `prompt` alone as a new last row; return its next-token logits [V]."""

    def remove(self, index: int) -> None:
        """Drop row `index`."""

    def advance(self, tokens: list[int]) -> torch.Tensor:
        """Read `tokens[i]` into row i, all rows in one forward pass; return their next-token logits [n, V]."""

    def prompt_ids(self, prompt: Any) -> Sequence[int]:
        """The token ids of `prompt` (what a repetition penalty counts as already seen)."""


@dataclass
class DecodeRow:
    """One prompt in the batch: its next token, the tokens it chose, its budget, and (under a repetition
    penalty) the ids it has seen."""

    key: Hashable
    max_new_tokens: int
    next_token: int = -1
    new_ids: list[int] = field(default_factory=list)
    seen: torch.Tensor | None = None  # [1, n] the prompt's ids and the chosen ones


class DecodeBatch:
    """Prompts decoded greedily together; `join`, `leave` and `step` are called from one thread."""

    def __init__(self, rows: BatchRows, stop_ids: Sequence[int], repetition_penalty: float = 1.0):
        self.engine = rows
        self.stop_ids = frozenset(int(token) for token in stop_ids)
        self.repetition_penalty = repetition_penalty
        self.rows: list[DecodeRow] = []
        self.steps_by_size: Counter[int] = Counter()  # rows per step -> steps taken with that many

    def __len__(self) -> int:
        return len(self.rows)

    def join(self, key: Hashable, prompt: Any, max_new_tokens: int) -> DecodeRow:
        """Prefill `prompt` (what the engine reads) alone and add it to the batch; its first token is chosen here."""
        if any(row.key == key for row in self.rows):
            raise GeneratorError(f"a prompt with the key {key!r} is already decoding; give each its own key")
        if max_new_tokens < 1:
            raise GeneratorError(f"max_new_tokens={max_new_tokens}: a prompt to decode needs at least 1")
        row = DecodeRow(key, max_new_tokens)
        if self.repetition_penalty != 1.0:
            row.seen = torch.tensor([list(self.engine.prompt_ids(prompt))], dtype=torch.long)
        row.next_token = self._choose(row, self.engine.add(prompt, max_new_tokens))
        self.rows.append(row)
        return row

    def leave(self, key: Hashable) -> None:
        """Drop the prompt `key` from the batch (unknown keys are an error: a caller's bookkeeping is off)."""
        index = next((i for i, row in enumerate(self.rows) if row.key == key), None)
        if index is None:
            raise GeneratorError(f"no prompt with the key {key!r} is decoding")
        self.rows.pop(index)
        self.engine.remove(index)

    def step(self) -> list[DecodeRow]:
        """Take each row's chosen token; rows that stop (a stop token or the budget) leave and are
        returned; the others get their next token from one forward pass of the whole batch."""
        finished = [row for row in self.rows if self._take(row)]
        for row in finished:
            self.leave(row.key)
        if self.rows:
            self.steps_by_size[len(self.rows)] += 1
            logits = self.engine.advance([row.next_token for row in self.rows])
            for row, row_logits in zip(self.rows, logits, strict=True):
                row.next_token = self._choose(row, row_logits)
        return finished

    def _choose(self, row: DecodeRow, logits: torch.Tensor) -> int:
        """The greedy token from a row's logits [V], in float32 and under the repetition penalty as
        transformers' `generate` applies it (every id seen, the prompt's included)."""
        scores = logits.detach().to(torch.float32).reshape(1, -1)
        if row.seen is not None:
            seen = row.seen.to(scores.device)
            picked = torch.gather(scores, 1, seen)
            picked = torch.where(picked < 0, picked * self.repetition_penalty, picked / self.repetition_penalty)
            scores = scores.scatter(1, seen, picked)
        return int(scores.argmax(-1))

    def _take(self, row: DecodeRow) -> bool:
        """Record the row's chosen token; True when the row is done."""
        if row.next_token in self.stop_ids:
            return True
        row.new_ids.append(row.next_token)
        if row.seen is not None:
            row.seen = torch.cat([row.seen, torch.tensor([[row.next_token]], dtype=torch.long)], dim=1)
        return len(row.new_ids) >= row.max_new_tokens


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
    def add(self, prompt: Sequence[int], max_new_tokens: int) -> torch.Tensor:
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
    def advance(self, tokens: list[int]) -> torch.Tensor:
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
