"""The window schedule of the memory model (docs/memory-model.md): where each row goes, and the tensors
that implies.

The first part is pure arithmetic, touching no module and no tensor: the layout, the pieces a stream of
tokens is read in, the positions, and which ratio a context is read at (with the error that refuses a
context beyond the reach). The last part turns a piece into tensors: which of a step's rows are memory
tokens (`RawMemoryRows`) and which keys each row may attend to (`window_mask`, `bucket_bias`,
`full_mask`; docs/memory-model.md, "Layout of a window").

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

Memorizing meets the same few pieces window after window (every whole window is the same piece), so
the tables of a piece are built once per (key, device) and kept on the device: a window then costs no
host-to-device copy and no operators to rebuild them. Cached tables are shared, so nothing may write
into them; they are built outside inference mode, so a table first made under `torch.inference_mode`
can later serve a step that autograd records.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

import torch

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


# -- the tensors the schedule implies --------------------------------------------------------------
# distinct pieces kept per table: memorizing needs one or two (whole windows, a last partial one);
# decoding steps that bring a memory token need one per position in the window
TABLE_ENTRIES = 64


@dataclass
class RawMemoryRows:
    """Which rows of a step are raw tokens and which are memory tokens.

    `raw` and `memory` are row indices [n] and [m]; `order` [n + m] puts
    `cat([raw rows, memory rows])` back into sequence order. When the rows are whole
    groups of `group` raw rows followed by one memory row (a whole window, or any piece
    that starts and ends at a group boundary: the common case), they are split and merged
    by reshaping instead of gathering, which is cheaper forward and backward.
    """

    raw: torch.Tensor
    memory: torch.Tensor
    order: torch.Tensor
    group: int | None = None  # raw rows per memory row when the rows are regular groups
    raw_rows: tuple[int, ...] = ()  # `raw` and `memory` as the host knows them (never read back from a device)
    memory_rows: tuple[int, ...] = ()

    @classmethod
    def of(cls, raw_rows: list[int], memory_rows: list[int], device: torch.device) -> RawMemoryRows:
        raw = torch.tensor(raw_rows, dtype=torch.long, device=device)
        memory = torch.tensor(memory_rows, dtype=torch.long, device=device)
        order = torch.argsort(torch.cat([raw, memory]))
        group = len(raw_rows) // len(memory_rows) if memory_rows else None
        regular = group and len(raw_rows) == group * len(memory_rows) and memory_rows == [
            j * (group + 1) + group for j in range(len(memory_rows))]
        return cls(raw, memory, order, group if regular else None, tuple(raw_rows), tuple(memory_rows))

    def split(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, T, ...] -> raw rows [B, n, ...], memory rows [B, m, ...]."""
        if self.group is None:
            return rows.index_select(1, self.raw), rows.index_select(1, self.memory)
        batch, rest = rows.shape[0], rows.shape[2:]
        grouped = rows.view(batch, -1, self.group + 1, *rest)  # [B, m, group + 1, ...]
        return grouped[:, :, : self.group].reshape(batch, -1, *rest), grouped[:, :, self.group]

    def merge(self, raw: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """Raw rows [B, n, ...] and memory rows [B, m, ...] -> [B, n + m, ...] in sequence order."""
        if self.group is None:
            return torch.cat([raw, memory], dim=1).index_select(1, self.order)
        batch, groups, rest = memory.shape[0], memory.shape[1], memory.shape[2:]
        grouped = torch.cat([raw.view(batch, groups, self.group, *rest), memory.unsqueeze(2)], dim=2)
        return grouped.view(batch, -1, *rest)


def causal_end_mask(num_queries: int, num_keys: int, device: torch.device) -> torch.Tensor:
    """[Tq, S] bool: query i sees keys up to `S - Tq + i` (causal, aligned to the last key)."""
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(num_keys - num_queries)


def window_mask(scheme: str, ratio: int, rows_before: int, num_rows: int, device: torch.device) -> torch.Tensor | None:
    """[num_rows, rows_before + num_rows] bool: which rows of the current window each new row sees.

    Window row t is a memory token when `(t + 1) % (ratio + 1) == 0`. `full-coverage`
    is plain causal (None: no mask needed). Under `step-expansion` and `segmentation` a
    raw row sees the raw rows before it and no memory row of its window; memory token
    j sees itself and the raw rows before it (`step-expansion`) or only its own `ratio`
    raw rows (`segmentation`).
    """
    if scheme == "full-coverage":
        return None
    keys = torch.arange(rows_before + num_rows, device=device)  # [S]
    return _window_visibility(scheme, ratio, keys, rows_before, num_rows)


def bucket_bias(scheme: str, ratio: int, prefix: int, rows_before: int, num_rows: int, capacity: int,
                device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """[num_rows, capacity] additive bias (0: seen, -inf: not) over a whole cache buffer, for a
    decoding step's new rows.

    Rows `[:prefix]` (memory entries) are seen by every row; the window's rows as `window_mask`
    says; rows past the new ones (not yet written, or left over from a compacted window) by
    none. Only scalars change from token to token, never a shape.
    """
    hidden = unseen(num_rows, capacity, device, dtype)  # [T, C]
    if scheme == "full-coverage":  # row t sees buffer rows 0 .. prefix + rows_before + t
        return hidden.triu_(prefix + rows_before + 1)
    keys = torch.arange(capacity, device=device) - prefix  # [C] window row of each buffer row (< 0: entry)
    seen = (keys < 0)[None, :] | _window_visibility(scheme, ratio, keys, rows_before, num_rows)  # [T, C]
    return hidden.masked_fill_(seen, 0.0)


def unseen(num_rows: int, capacity: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """[num_rows, capacity] additive bias that hides every buffer row (-inf): where every bias starts."""
    return torch.full((num_rows, capacity), float("-inf"), dtype=dtype, device=device)


def own_columns_bias(lengths: torch.Tensor, columns: int, dtype: torch.dtype) -> torch.Tensor:
    """[n, columns] additive bias of n sequences in the slots of one buffer, each reading one new token
    written at column `lengths[i]`: 0 on its columns 0 .. lengths[i], -inf on the rest."""
    bias = unseen(lengths.shape[0], columns, lengths.device, dtype)
    return bias.masked_fill(torch.arange(columns, device=lengths.device)[None] <= lengths[:, None], 0)


def self_only_bias(first_row: int, num_rows: int, capacity: int, device: torch.device,
                   dtype: torch.dtype) -> torch.Tensor:
    """[num_rows, capacity] additive bias of placeholder rows written at buffer rows `first_row ..`: each
    sees itself alone (so that its softmax has a key)."""
    bias = unseen(num_rows, capacity, device, dtype)
    bias[torch.arange(num_rows, device=device), torch.arange(first_row, first_row + num_rows, device=device)] = 0
    return bias


def _window_visibility(scheme: str, ratio: int, keys: torch.Tensor, rows_before: int, num_rows: int) -> torch.Tensor:
    """[T, S] bool: window rows `keys` [S] (negative ones: not in the window) seen by the new rows
    `rows_before .. rows_before + T - 1`."""
    queries = torch.arange(rows_before, rows_before + num_rows, device=keys.device)[:, None]  # [T, 1]
    causal = (keys[None, :] >= 0) & (keys[None, :] <= queries)  # [T, S]
    if scheme == "full-coverage":
        return causal
    key_is_memory = (keys + 1) % (ratio + 1) == 0  # [S]
    query_is_memory = (queries + 1) % (ratio + 1) == 0  # [T, 1]
    causal_raw = causal & ~key_is_memory[None, :]  # [T, S]
    if scheme == "segmentation":
        group = keys // (ratio + 1)  # the memory token each raw row belongs to
        causal_raw = causal_raw & (~query_is_memory | (group[None, :] == queries // (ratio + 1)))
    return causal_raw | (keys[None, :] == queries)


def full_mask(num_queries: int, prefix: int, tail: int, mask: torch.Tensor | None, device) -> torch.Tensor:
    """[Tq, prefix + tail] bool: every prefix key, then `mask` (None: causal aligned to the last key)."""
    if mask is None:
        return _causal_full_mask(num_queries, prefix, tail, torch.device(device))
    if prefix == 0:
        return mask
    return torch.cat([torch.ones(num_queries, prefix, dtype=torch.bool, device=device), mask], dim=1)


@lru_cache(maxsize=2)
def _causal_full_mask(num_queries: int, prefix: int, tail: int, device: torch.device) -> torch.Tensor:
    """`full_mask` without a window mask, built by a step's first layer and reused by the others (and
    by the next step of the same shape)."""
    with torch.inference_mode(False), torch.no_grad():
        tail_mask = causal_end_mask(num_queries, tail, device)  # [Tq, tail]
        if prefix == 0:
            return tail_mask
        return torch.cat([torch.ones(num_queries, prefix, dtype=torch.bool, device=device), tail_mask], dim=1)


def raw_memory_rows(piece: WindowPiece, device: torch.device) -> RawMemoryRows:
    """Which of `piece`'s rows are raw and which are memory tokens (`piece.num_memory` > 0)."""
    return _raw_memory_rows(piece.ratio, piece.window_offset, piece.num_raw, torch.device(device))


def piece_mask(scheme: str, piece: WindowPiece, device: torch.device) -> torch.Tensor | None:
    """`window_mask` of `piece` [num_rows, rows_before + num_rows] bool (None under full-coverage)."""
    if scheme == "full-coverage":
        return None
    return _piece_mask(scheme, piece.ratio, piece.rows_before, piece.num_rows, torch.device(device))


def compaction_rows(window: int, ratio: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A complete window's memory rows [m] (window rows) and each one's position change [m] (<= 0) as it
    becomes memory entry j (`MemoryCache.compact`)."""
    return _compaction_rows(window, ratio, torch.device(device))


@lru_cache(maxsize=4)
def raw_then_memory(device: torch.device) -> RawMemoryRows:
    """The rows of a decoding round that brings memory rows: row 0 raw, row 1 memory, split by gathering
    (no `group`), so that each part is a tensor of its own: the regular split's strided view of a round's
    P memory rows sends their projections to a batched product that copies the weight P times."""
    with torch.inference_mode(False), torch.no_grad():
        return replace(RawMemoryRows.of([0], [1], device=device), group=None)


@lru_cache(maxsize=TABLE_ENTRIES)
def _raw_memory_rows(ratio: int, window_offset: int, num_raw: int, device: torch.device) -> RawMemoryRows:
    piece = WindowPiece(0, num_raw, ratio, window_offset, 0, False)
    with torch.inference_mode(False), torch.no_grad():
        return RawMemoryRows.of(*piece.row_kinds(), device=device)


@lru_cache(maxsize=TABLE_ENTRIES)
def _piece_mask(scheme: str, ratio: int, rows_before: int, num_rows: int, device: torch.device) -> torch.Tensor:
    with torch.inference_mode(False), torch.no_grad():
        return window_mask(scheme, ratio, rows_before, num_rows, device)


@lru_cache(maxsize=TABLE_ENTRIES)
def _compaction_rows(window: int, ratio: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    rows = memory_rows_of_window(window, ratio)
    with torch.inference_mode(False), torch.no_grad():
        window_rows = torch.tensor(rows, dtype=torch.long, device=device)  # [m]
        shift = torch.arange(len(rows), device=device) - window_rows  # [m]
    return window_rows, shift
