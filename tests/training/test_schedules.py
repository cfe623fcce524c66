"""Learning-rate schedules and ratio seeds are pure functions of the step."""

import math

import pytest

from memorag.training.schedules import lr_factor, ratio_counts, ratio_seed


def test_warmup_then_cosine_to_the_floor():
    assert lr_factor(0, 100, warmup_steps=4) == pytest.approx(1 / 5)
    assert lr_factor(3, 100, warmup_steps=4) == pytest.approx(4 / 5)
    assert lr_factor(4, 100, warmup_steps=4) == pytest.approx(1.0)
    assert lr_factor(52, 100, warmup_steps=4, min_ratio=0.1) == pytest.approx(0.1 + 0.9 * 0.5)
    assert lr_factor(100, 100, warmup_steps=4, min_ratio=0.1) == pytest.approx(0.1)
    assert lr_factor(500, 100, min_ratio=0.1) == pytest.approx(0.1)


def test_linear_and_constant():
    assert lr_factor(50, 100, schedule="linear") == pytest.approx(0.5)
    assert lr_factor(99, 100, schedule="constant") == 1.0
    with pytest.raises(ValueError):
        lr_factor(1, 10, schedule="step")
    values = [lr_factor(s, 40, 5, "cosine") for s in range(40)]
    assert all(b <= a + 1e-12 for a, b in zip(values[5:], values[6:]))
    assert not any(math.isnan(v) for v in values)


def test_ratio_seeds_are_stable_and_distinct():
    assert ratio_seed(42, 10, 0, 0) == ratio_seed(42, 10, 0, 0)
    seeds = {ratio_seed(42, step, micro, rank) for step in range(20) for micro in range(2) for rank in range(4)}
    assert len(seeds) == 160
    assert ratio_seed(43, 10, 0, 0) != ratio_seed(42, 10, 0, 0)


def test_ratio_counts_cover_the_compacted_windows():
    counts = ratio_counts(100, 16, [2, 4, 8], "step-random", seed=5)
    assert sum(counts.values()) == 6  # 7 windows, the last one is not compacted
    assert set(counts) <= {2, 4, 8}
    assert ratio_counts(64, 16, [4], "fixed", seed=0) == {4: 3}
    draws = sum((ratio_counts(1600, 16, [2, 4, 8], "step-random", seed=s) for s in range(10)), start=__import__("collections").Counter())
    assert all(draws[r] > 200 for r in (2, 4, 8))
