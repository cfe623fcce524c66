"""Training data: pretraining streams (packing), clue-SFT samples, collators, the clue-data builder."""

from .collate import collate_samples, collate_sequences, rank_slice
from .document_files import expand_files, read_blocks
from .packing import PackedBatches, PackingSpec
from .sft import NoBatchError, SFTBatches, SFTSample, SFTSpec, TokenizedSample, read_sft_jsonl, render_sample

__all__ = [
    "NoBatchError",
    "PackedBatches",
    "PackingSpec",
    "SFTBatches",
    "SFTSample",
    "SFTSpec",
    "TokenizedSample",
    "collate_samples",
    "collate_sequences",
    "expand_files",
    "rank_slice",
    "read_blocks",
    "read_sft_jsonl",
    "render_sample",
]
