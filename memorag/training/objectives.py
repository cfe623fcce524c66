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
uses (`memorag.memory.windows.read_windows`: functional cache, one activation checkpoint per
window), and each window is scored by the model's hook for labelled rows
(`MemoryModel.score_labelled`, logits of rows with a label only), so the `lm` objective is
`MemoryModel.forward`'s loss, computed the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from memorag.memory import MemoryModel
from memorag.memory.windows import MemoryModelOutput, next_token_targets, read_windows

from .config import LossSection


@dataclass
class ObjectiveOutput(MemoryModelOutput):
    lm_loss: float = float("nan")  # mean cross-entropy over the loss tokens (logged)
    kl_loss: float = float("nan")  # mean KL(teacher || memory model) over the same tokens


def teacher_logits(model: MemoryModel, input_ids: torch.Tensor) -> torch.Tensor:
    """The frozen base model over the whole sequence [B, N] -> logits [B, N, V] (no gradients)."""
    length = input_ids.shape[1]
    if length > model.max_positions:
        raise ValueError(
            f"distillation needs the base model to read the whole sequence, but {length} tokens exceed its "
            f"{model.max_positions} positions; shorten data.max_length or use loss.kind=lm"
        )
    with torch.no_grad():
        return model.base_model(input_ids=input_ids, use_cache=False).logits  # plain attention: no memory step


def window_losses(model: MemoryModel, hidden: torch.Tensor, targets: torch.Tensor,
                  teacher: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed cross-entropy and summed KL(teacher || student) over the window's tokens with a label.

    `hidden` [B, n, D] (raw rows, before the final norm), `targets` [B, n] (-100: no loss),
    `teacher` [B, n, V] logits at the same rows (None: no KL, returned as 0).
    """
    lm, logits = model.score_labelled(hidden, targets)  # logits [k, V] of the labelled rows
    if teacher is None:
        return lm, torch.zeros((), device=lm.device)
    student = F.log_softmax(logits, dim=-1)
    target = F.log_softmax(teacher[targets != -100].float(), dim=-1)
    kl = F.kl_div(student, target, log_target=True, reduction="sum")
    return lm, kl


def objective_forward(model: MemoryModel, input_ids: torch.Tensor, labels: torch.Tensor, loss: LossSection,
                      ratio_seed: int | None = None) -> ObjectiveOutput:
    """The `loss.kind` objective of `input_ids` [B, N] with `labels` [B, N] (HF convention)."""
    teacher = teacher_logits(model, input_ids) if loss.kind != "lm" else None  # [B, N, V]
    targets = next_token_targets(labels)  # [B, N]

    def score(hidden: torch.Tensor, columns: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return window_losses(model, hidden, targets[:, columns], teacher[:, columns] if teacher is not None else None)

    zero = torch.zeros((), device=input_ids.device)
    lm_sum, kl_sum = read_windows(model, input_ids, score, ratio_seed=ratio_seed) or (zero, zero)
    count = int((targets != -100).sum())
    lm_mean, kl_mean = lm_sum / max(count, 1), kl_sum / max(count, 1)
    value = {"lm": lm_mean, "distill": kl_mean}.get(loss.kind, lm_mean + loss.weight * kl_mean)
    return ObjectiveOutput(loss=value, num_loss_tokens=count, lm_loss=float(lm_mean.detach()),
                           kl_loss=float(kl_mean.detach()) if teacher is not None else float("nan"))
