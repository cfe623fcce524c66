"""Clue-SFT samples (stage 2): the JSONL format, chat rendering, and length-bucketed batches.

Format: one JSON object per line,

    {"context": "<the long text>",
     "instruction": "<the task instruction or query>",
     "target": "<what the model should write: clues, surrogate queries, key points or an answer>",
     "system": "<optional system prompt for this sample>",
     "id": "<optional>", "task": "<optional, e.g. clues>"}

`context`, `instruction` and `target` are required non-empty strings; `system` is
optional; other keys (ids, task names, metadata) are ignored.

Rendering uses the base model's chat template, the same layout the memory model
uses at inference (`memorag.prompting.chat_layout.PromptLayout`): the user turn is the
context, a blank line, then the instruction; the assistant turn is the target. A
tokenizer without a chat template gets the plain layout: context, blank line,
instruction, a line break, the target and EOS. Labels are -100 on every token but
the target's (for chat templates, the target's tokens through the end-of-turn
marker), so the loss is on the target only.

`SFTBatches` reads the samples lazily in a seeded order per epoch and groups them
by window count (ceil(length / window)), so a batch holds samples of equal window
count, right-padded to the longest (pads are labelled -100). It reads other sample
formats too, given their `parse` (the reader's, `memorag.training.data.reader_samples`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memorag.config import ConfigError
from memorag.prompting.chat_layout import PromptLayout
from memorag.storage.io import atomic_write_text

from .document_files import expand_files

REQUIRED_FIELDS = ("context", "instruction", "target")
IGNORE_INDEX = -100


def checked_fields(record: Any, required: tuple[str, ...], kind: str, where: str) -> str | None:
    """`record`'s optional `system` once `record` is a JSON object whose `required` fields are non-empty
    strings; else a ValueError naming `where`, the field and what a `kind` sample holds."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: {kind} sample must be a JSON object, got {type(record).__name__}")
    for name in required:
        value = record.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where}: field {name!r} must be a non-empty string "
                             f"(fields: {', '.join(required)}, and optionally system)")
    system = record.get("system")
    if system is not None and not isinstance(system, str):
        raise ValueError(f"{where}: field 'system' must be a string when given")
    return system


@dataclass(frozen=True)
class SFTSample:
    context: str
    instruction: str
    target: str
    system: str | None = None

    @classmethod
    def from_record(cls, record: Any, where: str = "record") -> SFTSample:
        system = checked_fields(record, REQUIRED_FIELDS, "an SFT", where)
        return cls(record["context"], record["instruction"], record["target"], system)


@dataclass(frozen=True)
class TokenizedSample:
    input_ids: list[int]
    labels: list[int]  # -100 except on target tokens

    def __len__(self) -> int:
        return len(self.input_ids)


def render_sample(tokenizer, sample: SFTSample, system: str | None = None) -> TokenizedSample:
    """Token ids and labels of one sample, with loss on the target tokens only."""
    system = sample.system if sample.system is not None else system
    layout = PromptLayout.for_tokenizer(tokenizer, system=system)
    prompt = layout.prefix + sample.context + layout.joiner + sample.instruction + layout.suffix
    if layout.chat:
        messages = [{"role": "user", "content": f"{sample.context}\n\n{sample.instruction}"},
                    {"role": "assistant", "content": sample.target}]
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
        full = tokenizer.apply_chat_template(messages, tokenize=False)
        if not full.startswith(prompt):
            raise ValueError("the chat template renders the user turn differently with and without the assistant "
                             "turn; the target cannot be separated from the prompt")
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        target_ids = tokenizer(full[len(prompt) :], add_special_tokens=False)["input_ids"]
    else:
        prompt_ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
        target_ids = tokenizer(sample.target, add_special_tokens=False)["input_ids"]
        if tokenizer.eos_token_id is not None:
            target_ids = [*target_ids, tokenizer.eos_token_id]
    if not target_ids:
        raise ValueError("the target renders to no tokens")
    return TokenizedSample(prompt_ids + target_ids, [IGNORE_INDEX] * len(prompt_ids) + list(target_ids))


def read_sft_jsonl(path: str | Path) -> list[SFTSample]:
    """Every sample of a JSONL file, checked (for small files and tools; training reads lazily)."""
    samples = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                samples.append(SFTSample.from_record(_parse(line, f"{path}:{number}"), f"{path}:{number}"))
    return samples


def write_samples(samples: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """SFT records (this module's format) as JSONL, written atomically."""
    return atomic_write_text(path, "".join(json.dumps(sample, ensure_ascii=False) + "\n" for sample in samples))


def _parse(line: str | bytes, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not valid JSON ({error})") from error


class NoBatchError(ConfigError):
    """A whole pass over the SFT data gave no batch (nothing fits, or no bucket fills)."""


@dataclass
class PassStats:
    """What one pass over the SFT data has seen so far (kept in the data position for resume)."""

    batches: int = 0
    samples: int = 0
    too_long: int = 0  # longer than max_length
    unreachable: int = 0  # within max_length, but beyond the model's reach
    shortest: int | None = None
    longest: int | None = None

    def saw(self, length: int, too_long: bool, unreachable: bool) -> None:
        self.samples += 1
        self.too_long += int(too_long)
        self.unreachable += int(unreachable)
        self.shortest = length if self.shortest is None else min(self.shortest, length)
        self.longest = length if self.longest is None else max(self.longest, length)

    def explain(self, spec: SFTSpec, files: list[str]) -> str:
        lengths = f"the longest sample has {self.longest} tokens, the shortest {self.shortest}"
        fitting = self.samples - self.too_long - self.unreachable
        if fitting == 0:
            reasons = []
            if self.too_long:
                reasons.append(f"{self.too_long} longer than data.max_length={spec.max_length}")
            if self.unreachable:
                reasons.append(f"{self.unreachable} beyond the model's reach at the smallest ratio "
                               f"(window {spec.window})")
            return (f"no SFT sample of {files} fits: of {self.samples} samples, {'; '.join(reasons)}. "
                    f"With data.max_length={spec.max_length}, {lengths}; raise data.max_length (within the "
                    "model's positions) or shorten the contexts")
        return (f"a pass over {files} gave no batch: {fitting} of {self.samples} samples fit "
                f"(data.max_length={spec.max_length}; {lengths}), but "
                f"{'no' if spec.same_windows else 'fewer than'} {spec.sequences_per_batch} of them "
                f"{'have the same window count' if spec.same_windows else 'do'}; lower data.batch_size or add samples")


@dataclass(frozen=True)
class SFTSpec:
    window: int
    sequences_per_batch: int = 1
    max_length: int = 1 << 30
    seed: int = 0
    max_epochs: int | None = None  # None: cycle forever
    same_windows: bool = True  # a batch's samples share a window count (they are padded into one tensor)


class SFTBatches:
    """Global micro-batches of `TokenizedSample`s with equal window counts; resumable.

    Samples are visited in a seeded permutation per epoch; each goes to the bucket of
    its window count (one bucket for all with `same_windows=False`, for samples that are
    read one by one, as RLGF's processes each read their own pair) and a bucket is
    emitted when it holds `sequences_per_batch` samples. Buckets still incomplete at the
    end of an epoch are dropped (with batch size 1 nothing is). Samples longer than
    `max_length`, or rejected by `fits`, are skipped and counted. A pass over the data
    that gives no batch at all (no sample fits, or no bucket fills) is refused with a
    `NoBatchError` naming `max_length` and the sample lengths, instead of cycling forever.
    """

    def __init__(
        self,
        files: Sequence[str | Path],
        render: Callable[[Any], TokenizedSample],
        spec: SFTSpec,
        fits: Callable[[int], bool] | None = None,
        parse: Callable[[Any, str], Any] = SFTSample.from_record,
    ) -> None:
        if not files:
            raise ValueError("no SFT data: set data.files to JSONL files of samples")
        self.files = expand_files(files)
        if any(path.suffix != ".jsonl" for path in self.files):
            raise ValueError("SFT data must be .jsonl files (see memorag.training.data.sft)")
        self.render = render
        self.parse = parse
        self.spec = spec
        self.fits = fits or (lambda _length: True)
        self.index = self._build_index()
        if not self.index:
            raise ValueError(f"no samples in {[str(p) for p in self.files]}")
        self.epoch = 0
        self.cursor = 0
        self.pending: dict[int, list[int]] = {}
        self.batch_index = 0
        self.skipped = 0
        self.pass_stats = PassStats()
        self._tokenized: dict[int, TokenizedSample] = {}
        self._order: tuple[int, list[int]] | None = None

    def _build_index(self) -> list[tuple[int, int]]:
        """(file number, byte offset) of every non-empty line: the samples, in file order."""
        index = []
        for number, path in enumerate(self.files):
            with open(path, "rb") as handle:
                offset = 0
                for line in handle:
                    if line.strip():
                        index.append((number, offset))
                    offset += len(line)
        return index

    def __len__(self) -> int:
        return len(self.index)

    def order(self, epoch: int) -> list[int]:
        """The visiting order of epoch `epoch` (cached for the current epoch)."""
        if self._order is None or self._order[0] != epoch:
            order = list(range(len(self.index)))
            random.Random(f"{self.spec.seed}:samples:{epoch}").shuffle(order)
            self._order = (epoch, order)
        return self._order[1]

    def sample(self, position: int) -> Any:
        number, offset = self.index[position]
        path = self.files[number]
        with open(path, "rb") as handle:
            handle.seek(offset)
            line = handle.readline()
        where = f"{path} (byte {offset})"
        return self.parse(_parse(line, where), where)

    def tokenized(self, position: int) -> TokenizedSample:
        if position not in self._tokenized:
            self._tokenized[position] = self.render(self.sample(position))
        return self._tokenized[position]

    def __iter__(self) -> SFTBatches:
        return self

    def __next__(self) -> list[TokenizedSample]:
        while True:
            if self.cursor >= len(self.index):
                if self.pass_stats.batches == 0:
                    raise NoBatchError(self.pass_stats.explain(self.spec, [str(p) for p in self.files]))
                if self.spec.max_epochs is not None and self.epoch + 1 >= self.spec.max_epochs:
                    raise StopIteration
                self.epoch += 1
                self.cursor = 0
                self.pending = {}
                self.pass_stats = PassStats()
                self._tokenized = {}
            position = self.order(self.epoch)[self.cursor]
            self.cursor += 1
            sample = self.tokenized(position)
            too_long = len(sample) > self.spec.max_length
            unreachable = not too_long and not self.fits(len(sample))
            self.pass_stats.saw(len(sample), too_long, unreachable)
            if too_long or unreachable:
                self.skipped += 1
                del self._tokenized[position]
                continue
            windows = -(-len(sample) // self.spec.window) if self.spec.same_windows else 0
            bucket = self.pending.setdefault(windows, [])
            bucket.append(position)
            if len(bucket) == self.spec.sequences_per_batch:
                del self.pending[windows]
                batch = [self.tokenized(p) for p in bucket]
                for p in bucket:
                    del self._tokenized[p]
                self.batch_index += 1
                self.pass_stats.batches += 1
                return batch

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "cursor": self.cursor,
            "pending": {str(windows): list(positions) for windows, positions in self.pending.items()},
            "batch_index": self.batch_index,
            "skipped": self.skipped,
            "pass_stats": asdict(self.pass_stats),
            "num_samples": len(self.index),
            "files": [str(path) for path in self.files],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["num_samples"]) != len(self.index):
            raise ValueError(f"the saved data position is for {state['num_samples']} samples, this data has "
                             f"{len(self.index)}; resume with the same data.files")
        self.epoch = int(state["epoch"])
        self.cursor = int(state["cursor"])
        self.pending = {int(w): [int(p) for p in positions] for w, positions in state["pending"].items()}
        self.batch_index = int(state["batch_index"])
        self.skipped = int(state["skipped"])
        # states written before pass_stats existed: assume the pass so far gave a batch if any was given
        default = {"batches": 1 if self.batch_index else 0}
        self.pass_stats = PassStats(**state.get("pass_stats", default))
        self._tokenized = {}

    def count_batches(self) -> int:
        """Micro-batches until the end of the last epoch (renders every sample once; needs max_epochs)."""
        if self.spec.max_epochs is None:
            raise ValueError("counting batches needs a finite number of epochs")
        fresh = SFTBatches(self.files, self.render, self.spec, self.fits, self.parse)
        return sum(1 for _ in fresh)
