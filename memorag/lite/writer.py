"""Writing the gists: several at a time, with a progress bar, each batch checkpointed as it is written."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from memorag.lite.memory import Gist
from memorag.lite.text_windows import GistWindow
from memorag.prompting import prompts
from memorag.storage.cache_root import cache_home

if TYPE_CHECKING:
    from memorag.generation.base import Generator


def default_checkpoint_dir() -> Path:
    """`gists/` under the cache root (`memorag.storage.cache_root.cache_home`; default ~/.cache/memorag/gists)."""
    return cache_home() / "gists"


class GistCheckpoint:
    """Gists already written, one JSON line each, kept in a file per writer and gist budget and keyed by
    their window's text (sha256): a memorize stopped half-way finds them and writes only the rest."""

    def __init__(self, folder: str | os.PathLike[str] | None, writer: str, max_new_tokens: int, language: str):
        key = hashlib.sha256(json.dumps([writer, max_new_tokens, language, prompts.LITE_GIST]).encode()).hexdigest()
        self.path = Path(folder) if folder else default_checkpoint_dir()
        self.path = self.path / f"{key[:32]}.jsonl"
        self.writer, self.max_new_tokens = writer, max_new_tokens

    def read(self) -> dict[str, str]:
        """The gist written for each window text's sha256 (a line broken off by a stop is skipped)."""
        found: dict[str, str] = {}
        if not self.path.is_file():
            return found
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                found[row["sha256"]] = row["gist"]
            except (ValueError, KeyError, TypeError):
                continue
        return found

    def append(self, written: Mapping[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            for sha256, gist in written.items():
                handle.write(json.dumps({"sha256": sha256, "gist": gist}, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def write_gists(windows: Sequence[GistWindow], texts: Sequence[str], generator: Generator, max_new_tokens: int, *,
                checkpoint: GistCheckpoint, batch_size: int = 8, language: str = "en",
                show_progress: bool | None = False) -> list[Gist]:
    """The gist of each window (`texts[i]` is the text of `windows[i]`), in order, each in at most
    `max_new_tokens`: those in `checkpoint` are taken from it, the others written `batch_size` at a
    time (`Generator.generate_batch`: a local model decodes them as one batch, an endpoint answers
    them concurrently) and checkpointed as each batch is written."""
    done = checkpoint.read()
    todo = [i for i, window in enumerate(windows) if window.sha256 not in done]
    with tqdm(total=len(windows), initial=len(windows) - len(todo), desc="writing gists", unit="gist",
              disable=show_progress is False, file=sys.stderr) as bar:
        for first in range(0, len(todo), batch_size):
            batch = todo[first:first + batch_size]
            asked = [prompts.fill(prompts.LITE_GIST, language, context=texts[i]) for i in batch]
            replies = generator.generate_batch(asked, max_new_tokens=max_new_tokens)
            written = {windows[i].sha256: reply.strip() for i, reply in zip(batch, replies, strict=True)}
            checkpoint.append(written)
            done.update(written)
            bar.update(len(batch))
    return [Gist(window, done[window.sha256], checkpoint.writer, max_new_tokens) for window in windows]
