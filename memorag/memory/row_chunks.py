"""Summed per-row scores over row chunks: at most `chunk_rows` rows of full-vocabulary logits exist at once.

The scores of labelled rows (cross-entropy, and KL against a teacher in training) need each
row's logits over the whole vocabulary: 4,096 rows of a 49K vocabulary are 800 MB in fp32,
and autograd keeps them, and their gradient, until the backward pass. Here the rows are
scored a chunk at a time; while autograd records, each chunk runs under activation
checkpointing, so only its summed scores are kept and its logits are recomputed, one chunk
at a time, in the backward pass. The sums are the same per-row terms added in chunks: equal
to the unchunked computation within floating-point reordering, gradients included. Rows that
fit in one chunk are scored exactly as without chunking (no recomputation).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# rows of logits computed at once while scoring: 1,024 rows of a 49K vocabulary are 200 MB in fp32
SCORE_CHUNK_ROWS = 1024

# (row tensors of one chunk, each [c, ...]) -> summed scores over the chunk's rows (0-dim tensors)
ChunkScore = Callable[..., tuple[torch.Tensor, ...]]


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
