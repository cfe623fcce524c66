"""Reading a sequence window by window and scoring each window: the loop of `MemoryModel.forward`
(`language_model_loss`) and of the training objectives (memorag/training/objectives.py), written once.

Each window goes through `MemoryModel.feed` (a loop over `MemoryModel.step`) into a working
cache that, while autograd records, is functional: gradients reach earlier windows through
the memory. With the model's `gradient_checkpointing` on, a window keeps only the cache
tensors and its scores, and is recomputed in the backward pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch.nn import functional as F

from .cache import MemoryCache
from .ratios import RatioOf

if TYPE_CHECKING:
    from .model import MemoryModel
    from .state import Memory

# (raw rows' last hidden states [B, n, D] of one window, the window's columns of the input) ->
# the window's summed scores (each a 0-dim tensor); the same number of scores for every window
WindowScore = Callable[[torch.Tensor, slice], tuple[torch.Tensor, ...]]


@dataclass
class MemoryModelOutput:
    loss: torch.Tensor | None  # mean next-token loss over raw tokens with a label
    num_loss_tokens: int
    logits: torch.Tensor | None = None  # [B, N, V] for raw tokens, only when asked for


def next_token_targets(labels: torch.Tensor) -> torch.Tensor:
    """Hugging Face labels [B, N] -> the label each raw token predicts [B, N]: the next token's, -100 at the end."""
    return torch.cat([labels[:, 1:], labels.new_full((labels.shape[0], 1), -100)], dim=1)


def read_windows(
    model: MemoryModel,
    input_ids: torch.Tensor,
    score: WindowScore,
    memory: Memory | None = None,
    ratio_seed: int | None = None,
    checkpoint_windows: bool = True,
) -> tuple[torch.Tensor, ...]:
    """Read `input_ids` [B, N] window by window after `memory` (or from nothing); the sums of `score`
    over the windows (an empty tuple for no tokens).

    The ratio is the memory's, else the one the length calls for (`MemoryModel.choose_ratio`,
    which refuses a sequence beyond the reach); under step-random each window draws its own,
    seeded by `ratio_seed` (default: the config's seed). `checkpoint_windows=False` turns
    checkpointing off for a `score` that keeps tensors of its own (logits).
    """
    total = input_ids.shape[1]
    fixed = memory.ratio if memory is not None else model.choose_ratio(total)
    ratio_of = model.ratio_function(fixed, seed=ratio_seed)
    functional = torch.is_grad_enabled()
    cache = model.new_cache(memory, functional=functional, reserve=0 if functional else total)
    checkpointed = checkpoint_windows and model.gradient_checkpointing and functional
    window = model.config.window
    sums: tuple[torch.Tensor, ...] = ()
    for start in range(0, total, window):
        columns = slice(start, min(start + window, total))
        ids = input_ids[:, columns]
        if checkpointed:
            scores = _checkpointed_window(model, ids, columns, cache, ratio_of, score)
        else:
            scores = score(torch.cat(model.feed(ids, cache, ratio_of, keep_hidden=True), 1), columns)
        sums = tuple(scores) if not sums else tuple(a + b for a, b in zip(sums, scores, strict=True))
    return sums


def _checkpointed_window(model: MemoryModel, ids: torch.Tensor, columns: slice, cache: MemoryCache,
                         ratio_of: RatioOf, score: WindowScore) -> tuple[torch.Tensor, ...]:
    """One window under activation checkpointing: only the cache tensors and the scores are kept."""
    from torch.utils.checkpoint import checkpoint

    num_layers, state = len(model.layers), cache.state

    def window_step(*tensors):
        inner = MemoryCache(num_layers, cache.rotate, state=state, keys=list(tensors[:num_layers]),
                            values=list(tensors[num_layers:]), functional=True)
        hidden = torch.cat(model.feed(ids, inner, ratio_of, keep_hidden=True), 1)
        return (*score(hidden, columns), *inner.keys, *inner.values, inner.state)

    *scores, new_state = checkpoint(window_step, *cache.keys, *cache.values, use_reentrant=False)
    num_scores = len(scores) - 2 * num_layers
    cache.keys = list(scores[num_scores : num_scores + num_layers])
    cache.values = list(scores[num_scores + num_layers :])
    cache.state = new_state
    return tuple(scores[:num_scores])


def language_model_loss(model: MemoryModel, input_ids: torch.Tensor, labels: torch.Tensor | None,
                        return_logits: bool, memory: Memory | None, ratio_seed: int | None) -> MemoryModelOutput:
    """`MemoryModel.forward`: the mean next-token cross-entropy over raw tokens with a label, through
    `MemoryModel.score_labelled` (logits of labelled rows only), or over every raw row's logits
    when they are asked for (`return_logits`; then windows are not checkpointed)."""
    targets = next_token_targets(labels) if labels is not None else None
    logits = []

    def window_loss(hidden: torch.Tensor, columns: slice) -> tuple[torch.Tensor]:
        window_targets = targets[:, columns] if targets is not None else None
        if return_logits:
            window_logits = model.logits(hidden).float()  # [B, n, V]
            logits.append(window_logits)
            if window_targets is not None:
                return (F.cross_entropy(window_logits.flatten(0, 1), window_targets.flatten(), ignore_index=-100,
                                        reduction="sum"),)
        elif window_targets is not None:
            return (model.score_labelled(hidden, window_targets)[0],)
        return (torch.zeros((), device=hidden.device),)

    sums = read_windows(model, input_ids, window_loss, memory, ratio_seed, checkpoint_windows=not return_logits)
    count = int((targets != -100).sum()) if targets is not None else 0
    loss_sum = sums[0] if sums else torch.zeros((), device=model.device)
    loss = loss_sum / max(count, 1) if labels is not None else None
    return MemoryModelOutput(loss=loss, num_loss_tokens=count, logits=torch.cat(logits, 1) if logits else None)
