"""The optimizer and learning-rate schedule of a run, and applying changed optimizer settings on resume.

AdamW over the memory parameters only, in two groups: matrices with `optim.weight_decay`,
vectors without. The schedule is `schedules.lr_factor` over `total_steps`, read through the
`total_steps` callable so that a resumed run with a longer `optim.max_steps` decays over the
new length.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .config import OptimSection
from .schedules import lr_factor


def build_optimizer(parameters: dict[str, torch.nn.Parameter], optim: OptimSection) -> torch.optim.AdamW:
    decay = [p for p in parameters.values() if p.dim() >= 2]
    no_decay = [p for p in parameters.values() if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": optim.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=optim.lr, betas=tuple(optim.betas), eps=optim.eps,
    )


def build_scheduler(optimizer: torch.optim.Optimizer, optim: OptimSection,
                    total_steps: Callable[[], int]) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: lr_factor(step, total_steps(), optim.warmup_steps, optim.schedule, optim.min_lr_ratio),
    )


def apply_optim_settings(scheduler: torch.optim.lr_scheduler.LambdaLR, optim: OptimSection) -> None:
    """Put `optim`'s values into restored optimizer state, which carries the checkpoint's own.

    Loading a checkpoint restores the optimizer's hyperparameters (lr, betas, eps, weight
    decay) and the scheduler's base learning rate as they were; a resume that changes them
    sets them here, and the learning rate of the next step from the schedule as it now is."""
    groups = scheduler.optimizer.param_groups
    scheduler.base_lrs = [optim.lr for _ in groups]
    for index, group in enumerate(groups):
        group["initial_lr"] = optim.lr
        group["betas"] = tuple(optim.betas)
        group["eps"] = optim.eps
        group["weight_decay"] = optim.weight_decay if index == 0 else 0.0  # the groups of build_optimizer
    rates = [base * factor(scheduler.last_epoch) for base, factor in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
    for group, rate in zip(groups, rates):
        group["lr"] = rate
    scheduler._last_lr = rates  # what get_last_lr() reports, as LambdaLR.step() leaves it
