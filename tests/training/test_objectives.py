"""Training objectives: the LM loss as the model computes it, and KL from the full-context base."""

from __future__ import annotations

import pytest
import torch

from memorag.memory import MemoryConfig, MemoryModel
from memorag.training.config import LossSection
from memorag.training.objectives import objective_forward, teacher_logits
from tests.memory.conftest import perturb_memory_parameters, random_ids, tiny_base


def memory_model(window=16, ratios=(4,), checkpointing=False, **base):
    built = MemoryModel(tiny_base("llama", **base), MemoryConfig(window=window, ratios=list(ratios)))
    perturb_memory_parameters(built)
    built.gradient_checkpointing = checkpointing
    return built.eval()


def test_kl_is_zero_when_the_memory_model_reads_like_the_base():
    # one window at ratio = window: its only memory token comes after the last raw token, so
    # every raw row is computed exactly as the base computes it
    model = memory_model(window=16, ratios=(16,))
    ids = random_ids(16)
    output = objective_forward(model, ids, ids.clone(), LossSection(kind="distill"))
    assert output.num_loss_tokens == 15
    assert abs(float(output.loss.detach())) < 1e-5
    with torch.no_grad():
        logits = model.base_model(ids).logits[0, :-1]
    assert output.lm_loss == pytest.approx(float(torch.nn.functional.cross_entropy(logits, ids[0, 1:])), rel=1e-5)


def test_kl_is_positive_when_the_memory_compresses_and_equals_a_direct_computation():
    model = memory_model()
    ids = random_ids(48, seed=2)
    output = objective_forward(model, ids, ids.clone(), LossSection(kind="distill"))
    with torch.no_grad():
        student = model(ids, return_logits=True).logits[0, :-1].log_softmax(-1)
        teacher = teacher_logits(model, ids)[0, :-1].log_softmax(-1)
    expected = (teacher.exp() * (teacher - student)).sum(-1).mean()
    assert float(output.loss.detach()) > 1e-3
    assert float(output.loss.detach()) == pytest.approx(float(expected), rel=1e-4)


def test_gradients_reach_the_memory_parameters_only():
    model = memory_model()
    ids = random_ids(48, seed=1)
    model.train()
    output = objective_forward(model, ids, ids.clone(), LossSection(kind="distill"))
    output.loss.backward()
    memory = model.memory_parameters()
    last = f"layers.{len(model.layers) - 1}.q."  # the last layer's memory queries feed no raw row: no gradient
    reached = {name for name, p in memory.items() if p.grad is not None and float(p.grad.abs().sum()) > 0}
    assert reached == {name for name in memory if not name.startswith(last)}
    memory_ids = {id(p) for p in memory.values()}
    assert all(p.grad is None for p in model.parameters() if id(p) not in memory_ids)


@pytest.mark.parametrize("kind", ["distill", "mix"])
def test_checkpointing_changes_nothing(kind):
    ids = random_ids(48, seed=4)
    labels = ids.clone()
    labels[:, :20] = -100  # an SFT-like sample: no loss on the first tokens
    results = []
    for checkpointing in (False, True):
        model = memory_model(checkpointing=checkpointing)
        output = objective_forward(model, ids, labels, LossSection(kind=kind, weight=0.5))
        output.loss.backward()
        results.append((float(output.loss.detach()), model.memory_embedding.grad.clone(), output.num_loss_tokens))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    assert torch.allclose(results[0][1], results[1][1], rtol=1e-4, atol=1e-7)
    assert results[0][2] == results[1][2] == 48 - 20


def test_mix_is_lm_plus_weighted_kl_and_lm_matches_the_model_loss():
    model = memory_model()
    ids = random_ids(48, seed=5)
    mixed = objective_forward(model, ids, ids.clone(), LossSection(kind="mix", weight=0.25))
    assert float(mixed.loss.detach()) == pytest.approx(mixed.lm_loss + 0.25 * mixed.kl_loss, rel=1e-5)
    with torch.no_grad():
        assert mixed.lm_loss == pytest.approx(float(model(ids, labels=ids).loss), rel=1e-5)


def test_sequences_beyond_the_teachers_positions_are_refused():
    model = memory_model(max_position_embeddings=40)
    with pytest.raises(ValueError, match="exceed its 40 positions"):
        objective_forward(model, random_ids(48), random_ids(48), LossSection(kind="distill"))


def test_bad_loss_settings_are_refused():
    with pytest.raises(ValueError, match="loss.kind"):
        LossSection(kind="kl")
    with pytest.raises(ValueError, match="loss.weight"):
        LossSection(kind="mix", weight=-1)


def test_the_trainer_trains_with_the_mix_objective(tmp_path):
    from memorag.training.trainer import Trainer
    from tests.training.helpers import debug_config, reset_accelerate, train_losses

    reset_accelerate()
    trainer = Trainer(debug_config(tmp_path / "run", "loss.kind=mix", "loss.weight=0.5", "optim.max_steps=3"))
    before = trainer.unwrapped.memory_embedding.detach().clone()
    summary = trainer.train()
    losses = train_losses(tmp_path / "run")
    assert summary["step"] == 3 and len(losses) == 3
    assert all(loss > 0 and loss == loss for loss in losses.values())
    assert not torch.equal(before, trainer.unwrapped.memory_embedding.detach())


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_lm_objective_equals_the_models_own_loss_and_gradients(checkpointing):
    ids = random_ids(48, seed=6, batch=2)
    labels = ids.clone()
    labels[:, :30] = -100  # an SFT sample: logits of the context rows are not needed
    ours, theirs = memory_model(checkpointing=checkpointing), memory_model(checkpointing=checkpointing)
    mine = objective_forward(ours, ids, labels, LossSection(kind="lm"), ratio_seed=3)
    reference = theirs(ids, labels=labels, ratio_seed=3)
    assert mine.num_loss_tokens == reference.num_loss_tokens == 2 * 18
    assert float(mine.loss.detach()) == pytest.approx(float(reference.loss.detach()), rel=1e-6)
    mine.loss.backward()
    reference.loss.backward()
    for name, param in ours.memory_parameters().items():
        other = theirs.memory_parameters()[name].grad
        assert (param.grad is None) == (other is None)
        if other is not None:
            assert torch.allclose(param.grad, other, rtol=1e-4, atol=1e-7), name
