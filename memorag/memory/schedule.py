"""Pure window / ratio / position arithmetic of the memory model.

Nothing here touches a module or a tensor.

A window holds `window` raw tokens. Memory token `i` of a window follows its raw
token `(i + 1) * ratio - 1` (one memory token after every `ratio`-th raw token) and
takes that token's position. Raw tokens never attend to the memory tokens of their
own window, so the memory tokens of a window are computed in one pass when its last
raw token has arrived; the fill of the current window carries across calls, so a
window filled by several calls gets the same memory as one filled at once. Then the
window is compacted: its memory tokens become memory entries, its raw rows are
dropped.

Positions: memory entries occupy `0 .. num_entries - 1`; raw token `j` of the current
window sits at `num_entries + j`. A memory token moves once, when it is compacted,
from `num_entries + (i + 1) * ratio - 1` to `num_entries + i`.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ScheduleState:
    """Where a stream stands: entries so far and the fill of the current window."""

    num_tokens: int = 0  # raw tokens read in total
    num_entries: int = 0  # memory entries per layer
    window_index: int = 0  # index of the current (incomplete) window
    raw_in_window: int = 0  # raw tokens of the current window so far
    ratio: int = 0  # ratio of the current window; 0 before its first token

    @property
    def cache_length(self) -> int:
        """Key/value rows held per layer: memory entries, then the current window's raw rows."""
        return self.num_entries + self.raw_in_window

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleState:
        return cls(**{key: int(value) for key, value in data.items()})


@dataclass(frozen=True)
class Piece:
    """A run of new raw tokens inside one window."""

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
    def first_position(self) -> int:
        return self.num_entries + self.window_offset


def window_ratio(window_index: int, ratios: list[int], ratio_mix: str, seed: int) -> int:
    """The ratio of window `window_index`: a pure function, so streaming equals one call."""
    if ratio_mix == "step-random" and len(ratios) > 1:
        return random.Random(f"{seed}:{window_index}").choice(ratios)
    return ratios[0]


def plan(state: ScheduleState, num_new: int, window: int, ratio_for_window) -> list[tuple[Piece, ScheduleState]]:
    """Split `num_new` raw tokens into per-window pieces, each with the state after it.

    `ratio_for_window(window_index) -> int` gives a new window its ratio. The state
    after a piece that completes its window is the state after compaction.
    """
    pieces: list[tuple[Piece, ScheduleState]] = []
    offset = 0
    while offset < num_new:
        ratio = state.ratio or ratio_for_window(state.window_index)
        take = min(window - state.raw_in_window, num_new - offset)
        filled = state.raw_in_window + take
        complete = filled == window
        piece = Piece(offset, offset + take, ratio, state.raw_in_window, state.num_entries, complete)
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


def memory_token_offsets(window: int, ratio: int) -> list[int]:
    """Window offset (= raw token followed, = position minus entries) of each memory token."""
    return [(i + 1) * ratio - 1 for i in range(window // ratio)]


def entries_after(num_tokens: int, window: int, ratio: int) -> int:
    """Memory entries per layer after `num_tokens` raw tokens at a fixed ratio."""
    return (num_tokens // window) * (window // ratio)


def positions_needed(num_tokens: int, window: int, ratio: int) -> int:
    """Positions a context of `num_tokens` raw tokens needs at one ratio.

    The memory of the windows before the last one, plus a whole last window: the
    rest of it is the room a prompt and its answer continue in.
    """
    if num_tokens <= 0:
        return 0
    complete = (num_tokens - 1) // window  # windows compacted before the last one starts
    return complete * (window // ratio) + window


def reach(max_positions: int, window: int, ratio: int) -> int:
    """Longest context (raw tokens) that fits in `max_positions` at a fixed ratio: `(P - L) * r + L`."""
    if max_positions < window:
        return max_positions
    return ((max_positions - window) // (window // ratio) + 1) * window


def smallest_fitting_ratio(num_tokens: int, max_positions: int, window: int, candidates) -> int | None:
    """The smallest ratio among `candidates` (dividing `window`) that reaches `num_tokens`, or None."""
    for ratio in sorted(candidates):
        if window % ratio == 0 and positions_needed(num_tokens, window, ratio) <= max_positions:
            return ratio
    return None
