"""A mean over questions with its 95% percentile bootstrap interval (resampling the questions)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

SAMPLES = 10_000


def mean_interval(values: Sequence[float], samples: int = SAMPLES, seed: int = 0) -> dict[str, float] | None:
    """The mean of `values` and the 2.5th and 97.5th percentiles of the means of `samples` resamples
    (with replacement, a generator seeded by `seed`), rounded to 2 decimals; None without values."""
    if not values:
        return None
    points = torch.tensor(list(values), dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    draws = points[torch.randint(0, len(points), (samples, len(points)), generator=generator)].mean(-1)
    low, high = torch.quantile(draws, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return {"points": round(float(points.mean()), 2), "low": round(low, 2), "high": round(high, 2),
            "examples": len(points), "bootstrap_samples": samples, "seed": seed}
