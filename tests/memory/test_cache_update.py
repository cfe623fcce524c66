"""The working cache's write path is `update`, with the signature and contract of transformers' `Cache.update`."""

import torch

from memorag.memory.cache import Allocation, MemoryCache
from memorag.memory.schedule import ScheduleState


def _identity_rotate(keys, offsets):
    return keys


def _states(rows: int, fill: float) -> torch.Tensor:
    return torch.full((1, 2, rows, 4), fill)  # [B, H_kv, n, d]


def test_update_appends_and_returns_the_rows_the_step_attends_over():
    cache = MemoryCache(2, _identity_rotate, allocation=Allocation(8))
    keys, values = cache.update(_states(3, 1.0), _states(3, -1.0), 0)
    assert keys.shape == values.shape == (1, 2, 3, 4)
    cache.mark_written(ScheduleState(raw_in_window=3))
    keys, values = cache.update(_states(2, 2.0), _states(2, -2.0), 0)
    assert keys.shape == (1, 2, 5, 4)
    assert keys[0, 0, :, 0].tolist() == [1.0, 1.0, 1.0, 2.0, 2.0]
    assert values[0, 0, :, 0].tolist() == [-1.0, -1.0, -1.0, -2.0, -2.0]
    assert cache.keys[1] is None  # another layer is untouched
