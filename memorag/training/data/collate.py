"""Turn a process's share of a micro-batch into tensors for `MemoryModel.forward`."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .sft import IGNORE_INDEX, TokenizedSample


def rank_slice(batch: Sequence, rank: int, per_rank: int) -> list:
    """This process's `per_rank` items of a global micro-batch."""
    if len(batch) < (rank + 1) * per_rank:
        raise ValueError(f"a global micro-batch of {len(batch)} items has no full share for process {rank}")
    return list(batch[rank * per_rank : (rank + 1) * per_rank])


def collate_sequences(sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Equal-length packed sequences -> (input_ids [B, N], labels [B, N]); every token is a label."""
    lengths = {len(sequence) for sequence in sequences}
    if len(lengths) != 1:
        raise ValueError(f"packed sequences of one batch must have one length, got {sorted(lengths)}")
    input_ids = torch.tensor([list(sequence) for sequence in sequences], dtype=torch.long)
    return input_ids, input_ids.clone()


def collate_samples(samples: Sequence[TokenizedSample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples of equal window count -> right-padded (input_ids [B, N], labels [B, N]); pads are -100."""
    length = max(len(sample) for sample in samples)
    input_ids = torch.full((len(samples), length), pad_id, dtype=torch.long)
    labels = torch.full((len(samples), length), IGNORE_INDEX, dtype=torch.long)
    for row, sample in enumerate(samples):
        input_ids[row, : len(sample)] = torch.tensor(sample.input_ids, dtype=torch.long)
        labels[row, : len(sample)] = torch.tensor(sample.labels, dtype=torch.long)
    return input_ids, labels
