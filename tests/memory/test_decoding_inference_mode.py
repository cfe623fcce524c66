"""Decoding runs under inference mode (docs/memory-model.md, "Decoding"): every decoding step sees it,
the memory it read is left as it was and usable outside it, and the per-window tables a decode builds
(shared with memorize and training) stay ordinary tensors, so a training step still runs after it."""

from __future__ import annotations

import torch

from .conftest import random_ids, tiny_memory_model


def _recording_steps(model):
    seen: list[bool] = []
    step = model.step

    def recorded(inputs, *args, **kwargs):
        seen.append(torch.is_inference_mode_enabled())
        return step(inputs, *args, **kwargs)

    model.step = recorded  # an instance attribute over the class's method
    return seen


def test_every_decoding_step_runs_under_inference_mode_and_none_outside():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(40)[0].tolist())
    seen = _recording_steps(model)
    try:
        model.generate_ids(random_ids(5, seed=1)[0].tolist(), memory=memory, max_new_tokens=9, min_new_tokens=9)
        model.generate_ids_batch([random_ids(5, seed=2)[0].tolist(), random_ids(7, seed=3)[0].tolist()],
                                 memory=memory, max_new_tokens=6, min_new_tokens=6)
        decoded = len(seen)
        model.memorize(random_ids(20, seed=4)[0].tolist())  # memorize is not a decode: no inference mode
    finally:
        del model.step
    assert decoded > 9 and all(seen[:decoded])
    assert not any(seen[decoded:]) and len(seen) > decoded
    assert not torch.is_inference_mode_enabled()


def test_the_memory_stays_an_ordinary_tensor_and_unchanged_after_decoding():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(40)[0].tolist())
    before = [keys.clone() for keys in memory.keys]
    model.generate_ids(random_ids(5, seed=1)[0].tolist(), memory=memory, max_new_tokens=12)
    for keys, kept in zip(memory.keys, before, strict=True):
        assert not keys.is_inference()
        assert torch.equal(keys, kept)
        keys.add_(0)  # an in-place write outside inference mode is refused on an inference tensor


def test_the_window_tables_a_decode_builds_stay_ordinary_tensors_and_training_runs_after_it():
    from memorag.memory import schedule as window_tables

    cpu = torch.device("cpu")
    for table in (window_tables._raw_memory_rows, window_tables._piece_mask, window_tables._compaction_rows):
        table.cache_clear()  # so that the decode below builds them, under inference mode
    model = tiny_memory_model("llama", window=16, ratios=[4])
    ids = random_ids(40)
    model.generate_ids(ids[0].tolist(), max_new_tokens=4)  # whole windows of the prompt, compacted
    built = window_tables._raw_memory_rows.cache_info().currsize + window_tables._compaction_rows.cache_info().currsize
    split = window_tables._raw_memory_rows(4, 0, 16, cpu)  # a whole window's rows, as the decode's prefill split them
    rows, shift = window_tables._compaction_rows(16, 4, cpu)
    assert window_tables._raw_memory_rows.cache_info().currsize + window_tables._compaction_rows.cache_info().currsize == built
    for table in (split.raw, split.memory, split.order, rows, shift):  # the decode's own tables, not new ones
        assert not table.is_inference()  # an inference tensor could not be saved for a backward pass
    model.train()
    out = model(ids, labels=ids)  # the same whole windows, over those tables
    out.loss.backward()
    grads = [param.grad for param in model.memory_parameters().values()]
    assert all(grad is not None for grad in grads) and any(grad.abs().sum() > 0 for grad in grads)
