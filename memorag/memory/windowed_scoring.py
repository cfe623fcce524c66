"""Reading a sequence window by window and scoring each window: the loop of `MemoryModel.forward`
(`language_model_loss`) and of the training objectives (memorag/training/objectives.py), written once.

Each window goes through `MemoryCore.read_tokens` (a loop over window steps) into a working cache that,
while autograd records, is functional: gradients reach earlier windows through the memory. With
the model's `gradient_checkpointing` on, a window keeps only the cache tensors and its scores, and
is recomputed in the backward pass.

Scoring labelled rows (`score_labelled`: cross-entropy, and KL against a teacher in training)
needs each row's logits over the whole vocabulary: 4,096 rows of a 49K vocabulary are 800 MB in
fp32, and autograd keeps them, and their gradient, until the backward pass. Rows without a label
get no logits at all, and the labelled rows are scored a chunk at a time (`chunked_row_sums`);
while autograd records, each chunk runs under activation checkpointing, so only its summed scores
are kept and its logits are recomputed, one chunk at a time, in the backward pass. The sums are the
same per-row terms added in chunks: equal to the unchunked computation within floating-point
reordering, gradients included; rows that fit in one chunk are scored exactly as without chunking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .cache import MemoryCache
from .core import MemoryCore
from .schedule import RatioOf
from .state import Memory

# rows of logits computed at once while scoring: 1,024 rows of a 49K vocabulary are 200 MB in fp32
SCORE_CHUNK_ROWS = 1024

# (row tensors of one chunk, each [c, ...]) -> summed scores over the chunk's rows (0-dim tensors)
ChunkScore = Callable[..., tuple[torch.Tensor, ...]]

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
    model: MemoryCore,
    input_ids: torch.Tensor,
    score: WindowScore,
    memory: Memory | None = None,
    ratio_seed: int | None = None,
    checkpoint_windows: bool = True,
    cache: MemoryCache | None = None,
    ratio_of: RatioOf | None = None,
) -> tuple[torch.Tensor, ...]:
    """Read `input_ids` [B, N] window by window after `memory` (or from nothing); the sums of `score`
    over the windows (an empty tuple for no tokens).

    The ratio is the memory's, else the one the length calls for (`MemoryCore.choose_ratio`,
    which refuses a sequence beyond the reach); under step-random each window draws its own,
    seeded by `ratio_seed` (default: the config's seed). `checkpoint_windows=False` turns
    checkpointing off for a `score` that keeps tensors of its own (logits).

    `cache` (with its `ratio_of`) is a functional working cache to continue instead, read into
    in place of a new one: a context read once with gradients, then continued by several prompts
    (each from its own shallow copy; memorag/training/rlgf_objective.py).
    """
    total = input_ids.shape[1]
    functional = torch.is_grad_enabled() or cache is not None
    if cache is None:
        fixed = memory.ratio if memory is not None else model.choose_ratio(total)
        ratio_of = model.ratio_function(fixed, seed=ratio_seed)
        cache = model.new_cache(memory, functional=functional, reserve=0 if functional else total)
    elif ratio_of is None or not cache.functional:
        raise ValueError("a cache to continue must be functional, and comes with its ratio_of")
    checkpointed = checkpoint_windows and model.gradient_checkpointing and torch.is_grad_enabled()
    window = model.config.window
    sums: tuple[torch.Tensor, ...] = ()
    for start in range(0, total, window):
        columns = slice(start, min(start + window, total))
        ids = input_ids[:, columns]
        if checkpointed:
            scores = _checkpointed_window(model, ids, columns, cache, ratio_of, score)
        else:
            scores = score(torch.cat(model.read_tokens(ids, cache, ratio_of, keep_hidden=True), 1), columns)
        sums = tuple(scores) if not sums else tuple(a + b for a, b in zip(sums, scores, strict=True))
    return sums


def _checkpointed_window(model: MemoryCore, ids: torch.Tensor, columns: slice, cache: MemoryCache,
                         ratio_of: RatioOf, score: WindowScore) -> tuple[torch.Tensor, ...]:
    """One window under activation checkpointing: only the cache tensors and the scores are kept."""
    from torch.utils.checkpoint import checkpoint

    num_layers, state = len(model.layers), cache.state

    def window_step(*tensors):
        inner = MemoryCache(num_layers, cache.rotate, state=state, keys=list(tensors[:num_layers]),
                            values=list(tensors[num_layers:]), functional=True)
        hidden = torch.cat(model.read_tokens(ids, inner, ratio_of, keep_hidden=True), 1)
        return (*score(hidden, columns), *inner.keys, *inner.values, inner.state)

    *scores, new_state = checkpoint(window_step, *cache.keys, *cache.values, use_reentrant=False)
    num_scores = len(scores) - 2 * num_layers
    cache.keys = list(scores[num_scores : num_scores + num_layers])
    cache.values = list(scores[num_scores + num_layers :])
    cache.state = new_state
    return tuple(scores[:num_scores])


def language_model_loss(model: MemoryCore, input_ids: torch.Tensor, labels: torch.Tensor | None,
                        return_logits: bool, memory: Memory | None, ratio_seed: int | None) -> MemoryModelOutput:
    """`MemoryModel.forward`: the mean next-token cross-entropy over raw tokens with a label, through
    `score_labelled` (logits of labelled rows only), or over every raw row's logits
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
            return (score_labelled(model, hidden, window_targets)[0],)
        return (torch.zeros((), device=hidden.device),)

    sums = read_windows(model, input_ids, window_loss, memory, ratio_seed, checkpoint_windows=not return_logits)
    count = int((targets != -100).sum()) if targets is not None else 0
    loss_sum = sums[0] if sums else torch.zeros((), device=model.device)
    loss = loss_sum / max(count, 1) if labels is not None else None
    return MemoryModelOutput(loss=loss, num_loss_tokens=count, logits=torch.cat(logits, 1) if logits else None)


def score_labelled(model: MemoryCore, hidden: torch.Tensor, targets: torch.Tensor,
                   teacher_states: torch.Tensor | None = None, chunk_rows: int = SCORE_CHUNK_ROWS
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """`MemoryModel.score_labelled` (see its docstring): (summed cross-entropy [], summed KL [])."""
    keep = targets != -100  # [B, n]
    rows = (hidden[keep], targets[keep])  # [k, D], [k]
    if teacher_states is None:
        cross_entropy = chunked_row_sums(lambda *chunk: _cross_entropy_sum(model, *chunk), rows, chunk_rows)
        return *cross_entropy, hidden.new_zeros((), dtype=torch.float32)
    return chunked_row_sums(lambda *chunk: _distillation_sums(model, *chunk), (*rows, teacher_states[keep]),
                            chunk_rows)


def _cross_entropy_sum(model: MemoryCore, rows: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor]:
    logits = model.logits(rows).float()  # [c, V]
    return (F.cross_entropy(logits, targets, reduction="sum"),)


def _distillation_sums(model: MemoryCore, rows: torch.Tensor, targets: torch.Tensor, teacher_states: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    logits = model.logits(rows).float()  # [c, V]
    teacher = F.log_softmax(model.lm_head(teacher_states).float(), dim=-1)  # [c, V]
    kl = F.kl_div(F.log_softmax(logits, dim=-1), teacher, log_target=True, reduction="sum")
    return F.cross_entropy(logits, targets, reduction="sum"), kl


def chunked_row_sums(score: ChunkScore, rows: tuple[torch.Tensor, ...], chunk_rows: int = SCORE_CHUNK_ROWS
                     ) -> tuple[torch.Tensor, ...]:
    """`score` summed over chunks of at most `chunk_rows` rows of `rows` (tensors of equal first dimension)."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows}")
    total = rows[0].shape[0]
    if total <= chunk_rows:
        return score(*rows)
    from torch.utils.checkpoint import checkpoint

    recompute = torch.is_grad_enabled()
    sums: tuple[torch.Tensor, ...] = ()
    for start in range(0, total, chunk_rows):
        chunk = tuple(tensor[start : start + chunk_rows] for tensor in rows)  # each [c, ...]
        scores = checkpoint(score, *chunk, use_reentrant=False) if recompute else score(*chunk)
        sums = tuple(scores) if not sums else tuple(a + b for a, b in zip(sums, scores, strict=True))
    return sums
