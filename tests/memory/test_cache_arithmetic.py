import pytest

from .conftest import random_ids, tiny_memory_model


@pytest.mark.parametrize("num_tokens, window, ratio", [(15, 16, 4), (16, 16, 4), (100, 16, 4), (100, 16, 2), (130, 32, 8)])
def test_entries_per_layer_follow_the_schedule(num_tokens, window, ratio):
    model = tiny_memory_model("llama", window=window, ratios=[ratio])
    memory = model.memorize(random_ids(num_tokens)[0].tolist())
    complete = num_tokens // window
    assert memory.num_tokens == num_tokens
    assert memory.num_entries == complete * window // ratio
    raw = num_tokens - complete * window
    raw_rows = raw + raw // ratio  # the incomplete window's raw rows and the memory tokens already in it
    for keys, values in zip(memory.keys, memory.values, strict=True):
        assert keys.shape[2] == values.shape[2] == memory.num_entries + raw_rows
    bytes_per_row = 2 * 2 * 16 * 4  # keys and values, 2 KV heads, head dim 16, fp32
    assert memory.nbytes == len(memory.keys) * bytes_per_row * (memory.num_entries + raw_rows)
