"""Which ratio a context is read at, and the refusal of a context beyond the reach (docs/memory-model.md).

The arithmetic is `schedule.py`'s; this module applies it to a model's positions and
settings, and words the error a user sees.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import MemoryConfig
from .schedule import positions_needed, reach, smallest_fitting_ratio, window_ratio

STANDARD_RATIOS = (2, 4, 8, 16, 32, 64, 128)

RatioOf = Callable[[int], int]  # window index -> that window's ratio


class ContextTooLongError(ValueError):
    """The context does not fit in the model's positions at the chosen ratio."""


def choose_ratio(config: MemoryConfig, num_tokens: int, max_positions: int, name: str) -> int | None:
    """The fixed ratio for a context of `num_tokens`, checking the reach; None for step-random."""
    window = config.window
    if config.ratio_mix == "step-random":
        worst = min(config.ratios)
        if positions_needed(num_tokens, window, worst) > max_positions:
            raise too_long(config, num_tokens, worst, max_positions, name)
        return None
    if config.ratio_mix == "adaptive":
        ratio = smallest_fitting_ratio(num_tokens, max_positions, window, config.ratios)
        if ratio is None:
            raise too_long(config, num_tokens, max(config.ratios), max_positions, name)
        return ratio
    ratio = config.ratios[0]
    if positions_needed(num_tokens, window, ratio) > max_positions:
        raise too_long(config, num_tokens, ratio, max_positions, name)
    return ratio


def too_long(config: MemoryConfig, num_tokens: int, ratio: int, max_positions: int, name: str) -> ContextTooLongError:
    """The error for a context of `num_tokens` beyond the reach at `ratio`, naming the smallest ratio that fits."""
    window = config.window
    fits = smallest_fitting_ratio(num_tokens, max_positions, window, STANDARD_RATIOS)
    if fits is not None:
        choices = ",".join(str(r) for r in STANDARD_RATIOS if window % r == 0)  # includes `fits`
        advice = (
            f"the smallest ratio that fits is {fits}: memorize with `--ratio {fits}` (or "
            f"`--set 'memory.ratios=[{fits}]'`), or let the "
            f"length pick the ratio: `--set memory.ratio_mix=adaptive --set 'memory.ratios=[{choices}]'`"
        )
    else:
        advice = "no ratio dividing the window fits; shorten the context or use a model with more positions"
    return ContextTooLongError(
        f"the context has {num_tokens} tokens, beyond the reach of {name} at ratio {ratio} "
        f"({reach(max_positions, window, ratio)} tokens with {max_positions} positions and "
        f"window {window}); {advice}"
    )


def ratio_function(config: MemoryConfig, fixed: int | None, seed: int | None = None) -> RatioOf:
    """`fixed` for every window, or (None) each window's seeded draw from `config.ratios`."""
    if fixed is not None:
        return lambda _index: fixed
    seed = config.seed if seed is None else seed
    return lambda index: window_ratio(index, config.ratios, config.ratio_mix, seed)
