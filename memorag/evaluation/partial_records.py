"""A long evaluation's records kept as they are made, so a stopped run resumes where it stopped.

`OUT.partial.jsonl` beside the output: its first line is the run's identity (what it scores
and how), each further line one example's record, appended and synced as it is made. A run
with the same output and identity gets the records already made and skips those examples;
one with another identity is refused, never mixed. A torn last line (a kill in the middle of
a write) is dropped. The finished run writes its output and removes the partial file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memorag.evaluation.results_store import ResultsMismatchError, append_json_line, read_json_lines
from memorag.storage.io import atomic_write_text


class PartialRecords:
    """The records made so far by a run of `identity` writing `out` (`done`: by example id)."""

    def __init__(self, out: str | os.PathLike[str], identity: dict[str, Any]):
        self.path = Path(out).with_suffix(".partial.jsonl")
        identity = json.loads(json.dumps(identity))  # as it reads back from the file
        lines = read_json_lines(self.path, repair=True)
        if lines and lines[0].get("identity") != identity:
            recorded = lines[0].get("identity") or {}
            changed = sorted(key for key in set(recorded) | set(identity) if recorded.get(key) != identity.get(key))
            raise ResultsMismatchError(
                f"{self.path} holds the records of a run with other settings ({', '.join(changed)} differ); "
                "run with the same settings to resume it, or remove that file to start over"
            )
        if not lines:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps({"identity": identity}, ensure_ascii=False) + "\n")
        self.done: dict[str, dict[str, Any]] = {record["id"]: record for record in lines[1:]}

    def add(self, record: dict[str, Any]) -> None:
        append_json_line(self.path, record)
        self.done[record["id"]] = record

    def finish(self) -> None:
        """The run is complete (its output written): the partial file goes."""
        self.path.unlink(missing_ok=True)
