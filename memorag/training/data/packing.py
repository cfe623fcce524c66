"""Pretraining batches: a lazily read token stream packed into equal-length sequences.

Documents are read file by file (the file order shuffled per epoch with the seed),
tokenized, joined with BOS/EOS, and cut into sequences. The stream yields *global
micro-batches*: `sequences_per_batch` sequences of one length (every process of a
distributed run reads the same stream and keeps its own slice, so no coordination
is needed and the position is the same everywhere). The length of micro-batch `j`
is drawn from `min_length..max_length` by a generator seeded with `(seed, j)`.

`state_dict()` is the exact position: epoch, file, offset inside the file, the
tokens read but not yet emitted, and the micro-batch count. A stream restored with
`load_state_dict` continues with exactly the batches the original would have given.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .document_files import Block, expand_files, hf_documents, read_blocks

Tokenize = Callable[[str], list[int]]


@dataclass(frozen=True)
class PackingSpec:
    """How a token stream is read and cut: the data knobs, then what the run decides.

    The data knobs (lengths, file order, BOS/EOS, text field, read size) are declared,
    with their defaults and checks, once: in the training config's `data` section
    (`memorag.training.config.DataSection`), whose `packing_spec` builds a spec from them.
    """

    min_length: int
    max_length: int
    length_multiple: int
    shuffle_files: bool
    add_bos: bool
    add_eos: bool
    text_field: str
    read_chars: int
    sequences_per_batch: int
    seed: int
    max_epochs: int | None  # None: cycle through the data forever

    def __post_init__(self) -> None:
        low, high = self.length_bounds
        if low > high:
            raise ValueError(
                f"no multiple of length_multiple={self.length_multiple} lies in "
                f"[{self.min_length}, {self.max_length}]"
            )

    @property
    def length_bounds(self) -> tuple[int, int]:
        multiple = self.length_multiple
        return -(-self.min_length // multiple), self.max_length // multiple

    def length_of(self, batch_index: int) -> int:
        """Sequence length of global micro-batch `batch_index`."""
        low, high = self.length_bounds
        if low == high:
            return low * self.length_multiple
        return random.Random(f"{self.seed}:length:{batch_index}").randint(low, high) * self.length_multiple


class PackedBatches:
    """Iterator of global micro-batches (lists of `sequences_per_batch` token lists)."""

    def __init__(
        self,
        files: Sequence[str | Path],
        tokenize: Tokenize,
        spec: PackingSpec,
        bos_id: int | None = None,
        eos_id: int | None = None,
        hf_dataset: tuple[str, str | None, str] | None = None,
    ) -> None:
        if hf_dataset is None and not files:
            raise ValueError("no training data: set data.files (or data.hf_dataset)")
        self.files = expand_files(files) if hf_dataset is None else []
        self.tokenize = tokenize
        self.spec = spec
        self.bos_id = bos_id if spec.add_bos else None
        self.eos_id = eos_id if spec.add_eos else None
        self.hf_dataset = hf_dataset
        self.epoch = 0
        self.file_index = 0  # index into this epoch's file order
        self.offset = 0  # inside the current file (or documents read, for hf_dataset)
        self.buffer: list[int] = []
        self.batch_index = 0
        self._blocks: Iterator[Block] | None = None

    # -- order --------------------------------------------------------------------------
    def file_order(self, epoch: int) -> list[Path]:
        order = list(self.files)
        if self.spec.shuffle_files:
            random.Random(f"{self.spec.seed}:files:{epoch}").shuffle(order)
        return order

    # -- iteration ----------------------------------------------------------------------
    def __iter__(self) -> PackedBatches:
        return self

    def __next__(self) -> list[list[int]]:
        length = self.spec.length_of(self.batch_index)
        needed = length * self.spec.sequences_per_batch
        while len(self.buffer) < needed:
            if not self._read_more():
                raise StopIteration
        sequences = [self.buffer[i * length : (i + 1) * length] for i in range(self.spec.sequences_per_batch)]
        del self.buffer[:needed]
        self.batch_index += 1
        return sequences

    def _read_more(self) -> bool:
        """Append the next block's tokens to the buffer; False when the last epoch is over."""
        while True:
            if self._blocks is None:
                self._blocks = self._open()
            block = next(self._blocks, None)
            if block is not None:
                self.offset = block.next_offset
                tokens = self.tokenize(block.text)
                if block.starts_document and self.bos_id is not None:
                    tokens = [self.bos_id, *tokens]
                if block.ends_document and self.eos_id is not None:
                    tokens.append(self.eos_id)
                self.buffer.extend(tokens)
                return True
            self._blocks = None
            if self.hf_dataset is None and self.file_index + 1 < len(self.files):
                self.file_index += 1
                self.offset = 0
                continue
            if self.spec.max_epochs is not None and self.epoch + 1 >= self.spec.max_epochs:
                return False
            self.epoch += 1
            self.file_index = 0
            self.offset = 0

    def _open(self) -> Iterator[Block]:
        if self.hf_dataset is not None:
            name, config, split = self.hf_dataset
            return _hf_blocks(name, config, split, self.spec.text_field, self.offset)
        path = self.file_order(self.epoch)[self.file_index]
        return read_blocks(path, self.offset, self.spec.text_field, self.spec.read_chars)

    # -- position -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "file_index": self.file_index,
            "offset": self.offset,
            "buffer": list(self.buffer),
            "batch_index": self.batch_index,
            "files": [str(path) for path in self.files],
            "seed": self.spec.seed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = [Path(p).name for p in state.get("files", [])]
        if saved != [path.name for path in self.files]:
            raise ValueError(
                f"the saved data position is for the files {saved}, but this run reads "
                f"{[path.name for path in self.files]}; resume with the same data.files"
            )
        self.epoch = int(state["epoch"])
        self.file_index = int(state["file_index"])
        self.offset = int(state["offset"])
        self.buffer = [int(token) for token in state["buffer"]]
        self.batch_index = int(state["batch_index"])
        self._blocks = None

    def count_batches(self) -> int:
        """Micro-batches until the end of the last epoch (reads the data once; needs max_epochs)."""
        if self.spec.max_epochs is None:
            raise ValueError("counting batches needs a finite number of epochs")
        fresh = PackedBatches(self.files, self.tokenize, self.spec, self.bos_id, self.eos_id, self.hf_dataset)
        return sum(1 for _ in fresh)


def _hf_blocks(name: str, config: str | None, split: str, text_field: str, skip: int) -> Iterator[Block]:
    for number, text in enumerate(hf_documents(name, config, split, text_field, skip=skip), start=skip + 1):
        yield Block(text, starts_document=True, ends_document=True, next_offset=number)
