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
with a label, shifted as in `forward`). The windows run as in `MemoryModel.forward`
(functional cache, one activation checkpoint per window), but logits are computed only
for rows with a label: the same loss and gradients as `MemoryModel.forward`, without the
logits of context rows that carry no loss (most of an SFT sample; each row's logits cost
a quarter of the rest of the model for SmolLM2's 49K vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from memorag.memory import MemoryModel
from memorag.memory.cache import MemoryCache
from memorag.memory.model import MemoryModelOutput
from memorag.memory.schedule import window_ratio

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
    keep = targets != -100  # [B, n]
    logits = model.lm_head(model.final_norm(hidden[keep])).float()  # [k, V]
    lm = F.cross_entropy(logits, targets[keep], reduction="sum")
    if teacher is None:
        return lm, torch.zeros((), device=lm.device)
    student = F.log_softmax(logits, dim=-1)
    target = F.log_softmax(teacher[keep].float(), dim=-1)
    kl = F.kl_div(student, target, log_target=True, reduction="sum")
    return lm, kl


def _ratio_function(model: MemoryModel, total: int, seed: int | None):
    config = model.config
    if config.ratio_mix != "step-random":
        fixed = model.choose_ratio(total)
        return lambda _index: fixed
    model.choose_ratio(total)  # checks the reach
    seed = config.seed if seed is None else seed
    return lambda index: window_ratio(index, config.ratios, config.ratio_mix, seed)


def objective_forward(model: MemoryModel, input_ids: torch.Tensor, labels: torch.Tensor, loss: LossSection,
                      ratio_seed: int | None = None) -> ObjectiveOutput:
    """The `loss.kind` objective of `input_ids` [B, N] with `labels` [B, N] (HF convention)."""
    batch, total = input_ids.shape
    teacher = teacher_logits(model, input_ids) if loss.kind != "lm" else None  # [B, N, V]
    targets = torch.cat([labels[:, 1:], labels.new_full((batch, 1), -100)], dim=1)  # [B, N]
    ratio_of = _ratio_function(model, total, ratio_seed)
    cache = model.new_cache(functional=True)
    window = model.config.window
    lm_sum = kl_sum = torch.zeros((), device=input_ids.device)
    for start in range(0, total, window):
        piece = slice(start, start + window)
        window_teacher = teacher[:, piece] if teacher is not None else None
        lm, kl = _window(model, input_ids[:, piece], targets[:, piece], window_teacher, cache, ratio_of)
        lm_sum, kl_sum = lm_sum + lm, kl_sum + kl
    count = int((targets != -100).sum())
    lm_mean, kl_mean = lm_sum / max(count, 1), kl_sum / max(count, 1)
    value = {"lm": lm_mean, "distill": kl_mean}.get(loss.kind, lm_mean + loss.weight * kl_mean)
    return ObjectiveOutput(loss=value, num_loss_tokens=count, lm_loss=float(lm_mean.detach()),
                           kl_loss=float(kl_mean.detach()) if teacher is not None else float("nan"))


def _window(model: MemoryModel, ids, targets, teacher, cache: MemoryCache, ratio_of):
    """One window's (CE sum, KL sum); under `model.gradient_checkpointing` only the cache and losses are kept."""
    if not model.gradient_checkpointing:
        hidden = torch.cat(model.feed(ids, cache, ratio_of, keep_hidden=True), 1)
        return window_losses(model, hidden, targets, teacher)
    from torch.utils.checkpoint import checkpoint

    layers, state = len(model.layers), cache.state

    def step(*tensors):
        inner = MemoryCache(layers, cache.rotate, state=state, keys=list(tensors[:layers]),
                            values=list(tensors[layers:]), functional=True)
        hidden = torch.cat(model.feed(ids, inner, ratio_of, keep_hidden=True), 1)
        return (*window_losses(model, hidden, targets, teacher), *inner.keys, *inner.values, inner.state)

    lm, kl, *rest = checkpoint(step, *cache.keys, *cache.values, use_reentrant=False)
    cache.keys, cache.values, cache.state = list(rest[:layers]), list(rest[layers : 2 * layers]), rest[-1]
    return lm, kl
