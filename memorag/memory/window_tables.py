"""Per-window tensors that are pure functions of the schedule, built once and reused (docs/memory-model.md,
"Memorizing").

Which rows of a piece are memory tokens, the mask of a window's rows under step-expansion or
segmentation, and which rows of a complete window become memory entries depend only on the ratio,
where the piece starts in its window and how many raw tokens it has. Memorizing meets the same few
pieces window after window (every whole window is the same piece), so each table is built once per
(key, device) from the host-side schedule and kept on the device: a window costs no host-to-device
copy and no operators to rebuild them.

The tables are shared: nothing may write into them. They are built outside inference mode so a
table first made by `memorize` (under `torch.inference_mode`, if a caller uses it) can later serve a
step that autograd records.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from .attention import RowSplit, window_mask
from .schedule import Piece, memory_rows_of_window

# distinct pieces kept per table: memorizing needs one or two (whole windows, a last partial one);
# decoding steps that bring a memory token need one per position in the window
TABLE_ENTRIES = 64


def row_split(piece: Piece, device: torch.device) -> RowSplit:
    """Which of `piece`'s rows are raw and which are memory tokens (`piece.num_memory` > 0)."""
    return _row_split(piece.ratio, piece.window_offset, piece.num_raw, torch.device(device))


def piece_mask(scheme: str, piece: Piece, device: torch.device) -> torch.Tensor | None:
    """`window_mask` of `piece` [num_rows, rows_before + num_rows] bool (None under full-coverage)."""
    if scheme == "full-coverage":
        return None
    return _piece_mask(scheme, piece.ratio, piece.rows_before, piece.num_rows, torch.device(device))


def compaction_rows(window: int, ratio: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A complete window's memory rows [m] (window rows) and each one's position change [m] (<= 0) as it
    becomes memory entry j (`MemoryCache.compact`)."""
    return _compaction_rows(window, ratio, torch.device(device))


@lru_cache(maxsize=TABLE_ENTRIES)
def _row_split(ratio: int, window_offset: int, num_raw: int, device: torch.device) -> RowSplit:
    piece = Piece(0, num_raw, ratio, window_offset, 0, False)
    with torch.inference_mode(False), torch.no_grad():
        return RowSplit.of(*piece.row_kinds(), device=device)


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
