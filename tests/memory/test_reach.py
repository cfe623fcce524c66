import pytest

from memorag.memory import ContextTooLongError

from .conftest import random_ids, tiny_memory_model


def test_a_context_beyond_reach_names_the_smallest_ratio_that_fits():
    # 64 positions, window 16 (a full window takes 16 + 16 / r positions): reach is 96 tokens at r=2
    # (5 windows of 8 entries, then one of 24 rows), 192 at r=4, 384 at r=8
    model = tiny_memory_model("llama", ratios=[2], base_overrides={"max_position_embeddings": 64})
    model.memorize(random_ids(96)[0].tolist())
    with pytest.raises(ContextTooLongError, match="the smallest ratio that fits is 4"):
        model.memorize(random_ids(97)[0].tolist())
    with pytest.raises(ContextTooLongError, match="the smallest ratio that fits is 8"):
        model.memorize(random_ids(300)[0].tolist())


def test_adaptive_chooses_the_smallest_ratio_that_fits():
    model = tiny_memory_model("llama", ratios=[2, 4, 8], ratio_mix="adaptive",
                              base_overrides={"max_position_embeddings": 64})
    assert model.memorize(random_ids(96)[0].tolist()).ratio == 2
    assert model.memorize(random_ids(100)[0].tolist()).ratio == 4
    memory = model.memorize(random_ids(300)[0].tolist())
    assert memory.ratio == 8 and memory.num_entries == (300 // 16) * 2
    with pytest.raises(ContextTooLongError):
        model.memorize(random_ids(500)[0].tolist())


def test_generation_past_the_last_position_is_refused():
    model = tiny_memory_model("llama", ratios=[2], base_overrides={"max_position_embeddings": 64})
    # 24 entries, then the last window's 12 raw rows and the 6 memory tokens among them
    memory = model.memorize(random_ids(60)[0].tolist())
    # 60 + 70 tokens run past the reach (96): the window after the memory of 96 tokens would need position 64
    with pytest.raises(ContextTooLongError, match="exceeds the 64 positions"):
        model.generate_ids([2 + i % 90 for i in range(70)], memory=memory, max_new_tokens=5)


def test_empty_inputs_are_refused():
    model = tiny_memory_model("llama")
    with pytest.raises(ValueError, match="empty"):
        model.memorize([])
    with pytest.raises(ValueError, match="empty"):
        model.generate_ids([], max_new_tokens=3)
