"""Pure window / ratio / position arithmetic of the memory model (docs/memory-model.md).

Nothing here touches a module or a tensor. The last part applies the arithmetic to a model's
positions and settings: which ratio a context is read at, and the error that refuses a context
beyond the reach.

The layout ("interleave", the one the released memory models were trained with): a
window holds `window` raw tokens, and one memory token is inserted right after every
`ratio`-th raw token of it, in sequence order. Raw token `a` of a window sits at window
row `a + a // ratio`; memory token `j` follows raw token `(j + 1) * ratio - 1` and sits
at window row `(j + 1) * (ratio + 1) - 1`. A complete window has `window + window //
ratio` rows. The count carries across calls: a window filled by several calls (during
generation, one token at a time) gets its memory tokens at the same rows as one filled
at once.

Positions: memory entries occupy `0 .. num_entries - 1`; window row `t` sits at
`num_entries + t`, raw and memory rows alike. When a window is complete it is compacted:
memory token `j` becomes memory entry `num_entries + j` (its position moves once, by
`j - row_j`), and the window's raw rows are dropped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from .config import MemoryConfig

# The layout this module computes; recorded in memory weights and memories so that weights
# trained under one layout are never read under another.
LAYOUT = "interleave"


def window_rows(raw: int, ratio: int) -> int:
    """Rows (raw and memory) that `raw` raw tokens of one window occupy."""
    return raw + raw // ratio


@dataclass(frozen=True)
class ScheduleState:
    """Where a stream stands: entries so far and the fill of the current window."""

    num_tokens: int = 0  # raw tokens read in total
    num_entries: int = 0  # memory entries per layer
    window_index: int = 0  # index of the current (incomplete) window
    raw_in_window: int = 0  # raw tokens of the current window so far
    ratio: int = 0  # ratio of the current window; 0 before its first token

    @property
    def memory_in_window(self) -> int:
        """Memory tokens already inserted in the current window."""
        return self.raw_in_window // self.ratio if self.ratio else 0

    @property
    def cache_length(self) -> int:
        """Key/value rows held per layer: memory entries, then the current window's rows."""
        return self.num_entries + self.raw_in_window + self.memory_in_window

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleState:
        return cls(**{key: int(value) for key, value in data.items()})


@dataclass(frozen=True)
class WindowPiece:
    """A run of new raw tokens inside one window, with the memory tokens inserted among them."""

    raw_start: int  # offset of the first raw token in the caller's input
    raw_end: int
    ratio: int
    window_offset: int  # raw tokens of the window present before this piece
    num_entries: int  # memory entries before this piece
    completes_window: bool

    @property
    def num_raw(self) -> int:
        return self.raw_end - self.raw_start

    @property
    def rows_before(self) -> int:
        """Rows of the window already cached before this piece."""
        return window_rows(self.window_offset, self.ratio)

    @property
    def num_memory(self) -> int:
        """Memory tokens inserted by this piece."""
        return (self.window_offset + self.num_raw) // self.ratio - self.window_offset // self.ratio

    @property
    def num_rows(self) -> int:
        return self.num_raw + self.num_memory

    @property
    def first_position(self) -> int:
        return self.num_entries + self.rows_before

    def row_kinds(self) -> tuple[list[int], list[int]]:
        """(raw rows, memory rows) of this piece, as indices into its own rows."""
        ratio, first = self.ratio, self.rows_before
        raw = [a + a // ratio - first for a in range(self.window_offset, self.window_offset + self.num_raw)]
        first_memory = self.window_offset // ratio
        memory = [(j + 1) * (ratio + 1) - 1 - first for j in range(first_memory, first_memory + self.num_memory)]
        return raw, memory


def window_ratio(window_index: int, ratios: list[int], ratio_mix: str, seed: int) -> int:
    """The ratio of window `window_index`: a pure function, so streaming equals one call."""
    if ratio_mix == "step-random" and len(ratios) > 1:
        return random.Random(f"{seed}:{window_index}").choice(ratios)
    return ratios[0]


def plan(state: ScheduleState, num_new: int, window: int, ratio_for_window) -> list[tuple[WindowPiece, ScheduleState]]:
    """Split `num_new` raw tokens into per-window pieces, each with the state after it.

    `ratio_for_window(window_index) -> int` gives a new window its ratio. The state
    after a piece that completes its window is the state after compaction.
    """
    pieces: list[tuple[WindowPiece, ScheduleState]] = []
    offset = 0
    while offset < num_new:
        ratio = state.ratio or ratio_for_window(state.window_index)
        take = min(window - state.raw_in_window, num_new - offset)
        filled = state.raw_in_window + take
        complete = filled == window
        piece = WindowPiece(offset, offset + take, ratio, state.raw_in_window, state.num_entries, complete)
        if complete:
            state = ScheduleState(
                num_tokens=state.num_tokens + take,
                num_entries=state.num_entries + window // ratio,
                window_index=state.window_index + 1,
            )
        else:
            state = replace(state, num_tokens=state.num_tokens + take, raw_in_window=filled, ratio=ratio)
        pieces.append((piece, state))
        offset += take
    return pieces


def memory_rows_of_window(window: int, ratio: int) -> list[int]:
    """Window row of each memory token of a complete window."""
    return [(j + 1) * (ratio + 1) - 1 for j in range(window // ratio)]


def entries_after(num_tokens: int, window: int, ratio: int) -> int:
    """Memory entries per layer after `num_tokens` raw tokens at a fixed ratio."""
    return (num_tokens // window) * (window // ratio)


def positions_needed(num_tokens: int, window: int, ratio: int) -> int:
    """Positions a context of `num_tokens` raw tokens needs at one ratio.

    The memory of the windows before the last one, plus a whole last window with its
    memory tokens: the rest of it is the room a prompt and its answer continue in.
    """
    if num_tokens <= 0:
        return 0
    complete = (num_tokens - 1) // window  # windows compacted before the last one starts
    return complete * (window // ratio) + window_rows(window, ratio)


def reach(max_positions: int, window: int, ratio: int) -> int:
    """Longest context (raw tokens) that fits in `max_positions` at a fixed ratio: about `(P - L) * r`."""
    full = window_rows(window, ratio)
    if max_positions < full:
        return 0  # not even one window with its memory tokens fits
    return ((max_positions - full) // (window // ratio) + 1) * window


def smallest_fitting_ratio(num_tokens: int, max_positions: int, window: int, candidates) -> int | None:
    """The smallest ratio among `candidates` (dividing `window`) that reaches `num_tokens`, or None."""
    for ratio in sorted(candidates):
        if window % ratio == 0 and positions_needed(num_tokens, window, ratio) <= max_positions:
            return ratio
    return None

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
