"""`memorize_batch`: several contexts memorized at once, each memory equal to memorizing it alone."""

from __future__ import annotations

import pytest
import torch

from .conftest import random_ids, tiny_memory_model


def _assert_same_memory(got, expected) -> None:
    assert got.state == expected.state and got.ratio == expected.ratio
    assert got.content_sha256 == expected.content_sha256 and got.identity == expected.identity
    for a, b in zip(got.keys + got.values, expected.keys + expected.values, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_each_memory_of_a_batch_equals_memorizing_it_alone(family):
    model = tiny_memory_model(family, window=16, ratios=[4])
    # lengths: three windows and a part, one window, a part only, two windows exactly
    contexts = [random_ids(n, seed=n)[0].tolist() for n in (53, 16, 7, 32)]
    alone = [model.memorize(ids) for ids in contexts]
    for got, expected in zip(model.memorize_batch(contexts), alone, strict=True):
        _assert_same_memory(got, expected)


def test_a_batch_continuing_one_memory_equals_continuing_it_alone():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(21)[0].tolist())  # one window and a part: pieces start mid-window
    contexts = [random_ids(n, seed=n)[0].tolist() for n in (30, 3, 11)]
    alone = [model.memorize(ids, memory=memory) for ids in contexts]
    for got, expected in zip(model.memorize_batch(contexts, memory=memory), alone, strict=True):
        _assert_same_memory(got, expected)


def test_a_batch_needs_a_list_of_contexts():
    model = tiny_memory_model("llama")
    for wrong in ("one text", []):
        with pytest.raises(ValueError, match="list of contexts"):
            model.memorize_batch(wrong)
