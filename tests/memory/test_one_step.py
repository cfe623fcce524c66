"""Every path of the memory model is a loop over `MemoryModel.step` (docs/memory-model.md, "The step")."""

from __future__ import annotations

import pytest
import torch

from memorag.memory.core import plan_steps
from memorag.training.config import LossSection
from memorag.training.objectives import objective_forward

from .conftest import random_ids, tiny_memory_model


@pytest.fixture
def counted():
    """A tiny model (window 16, ratio 4) whose `step` counts its calls and the pieces it reads."""
    model = tiny_memory_model("llama", window=16).eval()
    calls = []
    original = model.step

    def step(inputs, *args, **kwargs):
        calls.append(len(inputs))
        return original(inputs, *args, **kwargs)

    model.step = step
    return model, calls


def test_memorize_forward_and_the_objectives_read_one_step_per_window_piece(counted):
    model, calls = counted
    ids = random_ids(40)  # windows of 16, 16 and 8 tokens
    model.memorize(ids[0].tolist())
    assert calls == [1, 1, 1]
    calls.clear()
    with torch.no_grad():
        loss = model(ids, labels=ids).loss
    assert calls == [1, 1, 1]
    calls.clear()
    with torch.no_grad():
        objective = objective_forward(model, ids, ids.clone(), LossSection(kind="lm"))
    assert calls == [1, 1, 1]
    assert torch.equal(objective.loss, loss)  # one loop, one scoring hook: the same number


def test_a_checkpointed_window_is_recomputed_through_the_step(counted):
    model, calls = counted
    model.train().gradient_checkpointing = True
    ids = random_ids(32)
    model(ids, labels=ids).loss.backward()
    assert calls == [1, 1, 1, 1]  # two windows, each run again in the backward pass


def test_batched_decoding_packs_the_prompts_into_one_step(counted):
    model, calls = counted
    memory = model.memorize(random_ids(20)[0].tolist())
    calls.clear()
    model.generate_ids_batch([[5, 6, 7], [8, 9]], memory=memory, max_new_tokens=3)
    assert calls[0] == 2 and set(calls) <= {1, 2} and len(calls) >= 3


def test_plan_steps_splits_a_stream_at_window_ends():
    model = tiny_memory_model("llama", window=16)
    cache = model.new_cache()
    model.read_tokens(random_ids(10), cache)  # 10 of the window's 16 raw tokens read
    steps = plan_steps(random_ids(30), cache, 16, lambda _index: 4)
    assert [(step.piece.window_offset, step.input_ids.shape[1], step.piece.completes_window) for step in steps] == [
        (10, 6, True), (0, 16, True), (0, 8, False)]
    assert steps[-1].after.num_tokens == 40
