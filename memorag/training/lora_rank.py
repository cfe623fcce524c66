"""A saved LoRA adapter brought to a lower rank: each projection's update `scale * B @ A` replaced by the
update of the lower rank closest to it (the truncated SVD, Eckart-Young), so that a run can start from an
adapter trained at a higher rank and end with a smaller one.

    # a rank-16 adapter of alpha 32 (scale 2) into one of rank 8, alpha 16 (scale 2): the ratio is 1
    state = lower_rank(load_file("final/adapter_model.safetensors"), rank=8, scale=(32 / 16) / (16 / 8))
"""

from __future__ import annotations

import torch

LORA_A = ".lora_A."
LORA_B = ".lora_B."


def saved_rank(state: dict[str, torch.Tensor]) -> int:
    """The rank of a peft LoRA state dict (the rows of its lora_A matrices); 0 when it holds none."""
    ranks = {int(tensor.shape[0]) for key, tensor in state.items() if LORA_A in key}
    if len(ranks) > 1:
        raise ValueError(f"the adapter's projections have different ranks {sorted(ranks)}: a rank pattern is not "
                         "supported here")
    return ranks.pop() if ranks else 0


def lower_rank(state: dict[str, torch.Tensor], rank: int, scale: float) -> dict[str, torch.Tensor]:
    """`state` (peft's lora_A [r, in] and lora_B [out, r] per projection) with each pair at `rank` < r, the
    product multiplied by `scale` (the saved adapter's alpha / r over the new one's, so that the scaled update
    the model adds is kept); the singular values are split evenly between the two factors. Other tensors are
    kept as they are."""
    out = {key: tensor for key, tensor in state.items() if LORA_A not in key and LORA_B not in key}
    for key_a in (key for key in state if LORA_A in key):
        key_b = key_a.replace(LORA_A, LORA_B)
        if key_b not in state:
            raise ValueError(f"the adapter holds {key_a} without its {key_b}")
        a, b = state[key_a], state[key_b]
        if rank > a.shape[0]:
            raise ValueError(f"the adapter's rank {a.shape[0]} is below {rank}: only a higher rank is lowered")
        update = scale * (b.double() @ a.double())  # [out, in]
        u, s, vh = torch.linalg.svd(update, full_matrices=False)
        root = s[:rank].sqrt()
        out[key_b] = (u[:, :rank] * root).to(b.dtype)  # [out, rank]
        out[key_a] = (root[:, None] * vh[:rank]).to(a.dtype)  # [rank, in]
    return out
