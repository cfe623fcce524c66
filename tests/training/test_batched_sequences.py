"""Several sequences per micro-batch: each keeps its own memory, so a batch's loss and gradients are the
token-weighted sums of its sequences' own (the trainer's `data.batch_size`; configs/debug.yaml uses 2)."""

from __future__ import annotations

import pytest
import torch

from memorag.training.config import LossSection
from memorag.training.objectives import objective_forward
from tests.memory.conftest import random_ids, tiny_memory_model
from tests.training.helpers import debug_config, reset_accelerate, train_losses


def summed_objective(ids: torch.Tensor, labels: torch.Tensor, kind: str):
    """(the objective summed over the loss tokens, the memory parameters' gradients of that sum)."""
    model = tiny_memory_model("llama", seed=4, ratios=[2, 4], ratio_mix="step-random").train()
    model.gradient_checkpointing = True
    output = objective_forward(model, ids, labels, LossSection(kind=kind, weight=0.5), ratio_seed=9)
    total = output.loss * output.loss_token_count
    total.backward()
    grads = {name: p.grad.clone() for name, p in model.memory_parameters().items() if p.grad is not None}
    return total.detach(), grads


@pytest.mark.parametrize("kind", ["lm", "mix"])
def test_a_batch_of_two_sequences_scores_as_the_two_sequences_apart(kind):
    ids = random_ids(48, batch=2, seed=7)
    labels = ids.clone()
    labels[0, :30] = -100  # an SFT-like sample beside a pretraining one: different loss tokens per row
    batch_total, batch_grads = summed_objective(ids, labels, kind)
    apart = [summed_objective(ids[row : row + 1], labels[row : row + 1], kind) for row in range(2)]
    torch.testing.assert_close(batch_total, apart[0][0] + apart[1][0], rtol=1e-5, atol=1e-5)
    assert batch_grads.keys() == apart[0][1].keys() == apart[1][1].keys()
    for name, grad in batch_grads.items():
        torch.testing.assert_close(grad, apart[0][1][name] + apart[1][1][name], rtol=1e-4, atol=1e-6, msg=name)


def test_the_trainer_trains_two_sequences_per_step(tmp_path):
    reset_accelerate()
    from memorag.training.trainer import Trainer

    trainer = Trainer(debug_config(tmp_path / "run", "data.batch_size=2", "optim.max_steps=3"))
    try:
        assert [ids.shape[0] for ids, _ in trainer._next_micro_batches()] == [2]
    finally:
        trainer.close()
    reset_accelerate()
    summary = Trainer(debug_config(tmp_path / "run2", "data.batch_size=2", "optim.max_steps=3")).train()
    losses = train_losses(tmp_path / "run2")
    assert summary["step"] == 3 and sorted(losses) == [1, 2, 3]
    assert all(loss == loss and loss > 0 for loss in losses.values())
