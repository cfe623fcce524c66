"""The tensors the schedule implies: which rows are memory tokens, and which keys each row sees.

Everything here is a pure function of the schedule's numbers (schedule.py): a ratio, where a
piece starts in its window, how many rows it has. `RawMemoryRows` says which of a step's rows are
raw and which are memory tokens; `window_mask`, `bucket_bias` and `full_mask` say which keys a
row may attend to (docs/memory-model.md, "Layout of a window").

Memorizing meets the same few pieces window after window (every whole window is the same
piece), so the tables of a piece are built once per (key, device) and kept on the device: a
window then costs no host-to-device copy and no operators to rebuild them. Cached tables are
shared, so nothing may write into them; they are built outside inference mode, so a table first
made under `torch.inference_mode` can later serve a step that autograd records.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from .schedule import WindowPiece, memory_rows_of_window

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
    """The rows of a decoding round that brings memory rows: row 0 raw, row 1 memory."""
    with torch.inference_mode(False), torch.no_grad():
        return RawMemoryRows.of([0], [1], device=device)


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
