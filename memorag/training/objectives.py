"""Training objectives: the paper's LM loss, and distillation from the base reading the full context.

`loss.kind` (`memorag.training.config.LossSection`):
- `lm`: next-token cross-entropy on raw tokens (the loss of `MemoryModel.forward`);
- `distill`: KL(teacher || memory model) per raw token with a label, where the teacher is
  the frozen base model reading the *whole* sequence with no compression (it fits in its
  positions at the training lengths); the memory model reads the same tokens window by
  window from its memory. A memory that carried everything would match the teacher;
- `mix`: `lm + loss.weight * KL`.

The KL target is a full distribution per token (49K probabilities for SmolLM2) instead of
one label, a denser signal per step. Both losses are averaged over the same tokens (those
with a label, shifted as in `forward`). The windows are read by the loop `MemoryModel.forward`
uses (`memorag.memory.windowed_scoring.read_windows`: functional cache, one activation checkpoint per
window), and each window is scored by the model's hook for labelled rows
(`MemoryModel.score_labelled`, logits of rows with a label only, a chunk of rows at a time), so
the `lm` objective is `MemoryModel.forward`'s loss, computed the same way. The teacher is kept as
its last hidden states [B, N, D], and projected to the vocabulary in the same chunks: neither
model's logits exist for more than a chunk of rows at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from memorag.memory import MemoryModel
from memorag.memory.windowed_scoring import SCORE_CHUNK_ROWS, next_token_targets, read_windows

from .config import LossSection


@dataclass
class ObjectiveOutput:
    """The objective of one micro-batch. Everything is a tensor on the model's device, so computing it
    waits on nothing; the float and int properties read them (a host sync each), for logs and tests."""

    loss: torch.Tensor  # [] the objective, mean over the loss tokens
    lm_mean: torch.Tensor  # [] mean cross-entropy over the loss tokens (detached)
    kl_mean: torch.Tensor | None  # [] mean KL(teacher || memory model) over the same tokens (detached); None: no KL
    loss_token_count: torch.Tensor  # [] raw tokens with a label

    @property
    def num_loss_tokens(self) -> int:
        return int(self.loss_token_count)

    @property
    def lm_loss(self) -> float:
        return float(self.lm_mean)

    @property
    def kl_loss(self) -> float:
        return float(self.kl_mean) if self.kl_mean is not None else float("nan")


def teacher_states(model: MemoryModel, input_ids: torch.Tensor) -> torch.Tensor:
    """The frozen base model over the whole sequence [B, N] -> its last hidden states after its final
    norm [B, N, D] (no gradients); `model.lm_head` of a row gives the teacher's logits there."""
    length = input_ids.shape[1]
    if length > model.max_positions:
        raise ValueError(
            f"distillation needs the base model to read the whole sequence, but {length} tokens exceed its "
            f"{model.max_positions} positions; shorten data.max_length or use loss.kind=lm"
        )
    with torch.no_grad():  # plain attention: no memory step
        return model.base_model.get_decoder()(input_ids=input_ids, use_cache=False).last_hidden_state


def teacher_logits(model: MemoryModel, input_ids: torch.Tensor) -> torch.Tensor:
    """The frozen base model's logits over the whole sequence [B, N] -> [B, N, V] (no gradients; for
    inspection: the objective projects `teacher_states` a chunk of labelled rows at a time)."""
    states = teacher_states(model, input_ids)  # [B, N, D]
    with torch.no_grad():
        return model.lm_head(states)


def objective_forward(model: MemoryModel, input_ids: torch.Tensor, labels: torch.Tensor, loss: LossSection,
                      ratio_seed: int | None = None, chunk_rows: int = SCORE_CHUNK_ROWS) -> ObjectiveOutput:
    """The `loss.kind` objective of `input_ids` [B, N] with `labels` [B, N] (HF convention); logits are
    computed `chunk_rows` labelled rows at a time (memorag/memory/windowed_scoring.py)."""
    teacher = teacher_states(model, input_ids) if loss.kind != "lm" else None  # [B, N, D]
    targets = next_token_targets(labels)  # [B, N]

    def score(hidden: torch.Tensor, columns: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return model.score_labelled(hidden, targets[:, columns], teacher[:, columns] if teacher is not None else None,
                                    chunk_rows)

    zero = torch.zeros((), device=input_ids.device)
    lm_sum, kl_sum = read_windows(model, input_ids, score, ratio_seed=ratio_seed) or (zero, zero)
    count = (targets != -100).sum()  # [] on the device: no host sync
    lm_mean, kl_mean = lm_sum / count.clamp(min=1), kl_sum / count.clamp(min=1)
    value = {"lm": lm_mean, "distill": kl_mean}.get(loss.kind, lm_mean + loss.weight * kl_mean)
    return ObjectiveOutput(loss=value, lm_mean=lm_mean.detach(), loss_token_count=count,
                           kl_mean=kl_mean.detach() if teacher is not None else None)
