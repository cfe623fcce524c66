"""Results on disk, resumable: one JSON line per example and mode, one per finished cell.

    OUT/examples.jsonl   a record per (mode, task, length, example), appended (and synced) as each is done
    OUT/cells.jsonl      a summary per finished cell (mode, task, length), rewritten atomically
    OUT/config.yaml      the resolved configuration of the latest run
    OUT/prompts.json     every prompt of the package (memorag.prompting.prompts) as that run used them
    OUT/models.json      the models the answers came from, the memory weights by the hash of their parameters

A run that stops (killed, out of time, a failing example) keeps every record
written; the next run over the same folder skips finished cells and, inside an
unfinished cell, the examples already recorded. A torn last line (a kill in the
middle of a write) is dropped. Each record and cell carries the fingerprint of
the settings it was made with; results made with other settings, or with other
models (``models.json``), are refused, never mixed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memorag.storage.io import atomic_write_text

EXAMPLES_FILE = "examples.jsonl"
CELLS_FILE = "cells.jsonl"
CONFIG_FILE = "config.yaml"
PROMPTS_FILE = "prompts.json"  # every prompt of the package, as the run used them
MODELS_FILE = "models.json"  # the models the answers came from, the memory weights by their hash

CellKey = tuple[str, str, int | None]  # (mode label, task name, context length or None)


class ResultsMismatchError(RuntimeError):
    """The results folder holds results of the same cell made with other settings."""


def cell_key(record: dict[str, Any]) -> CellKey:
    return record["mode"], record["task"], record["length"]


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def read_json_lines(path: Path, repair: bool) -> list[dict[str, Any]]:
    """JSON objects of a JSON-lines file; a torn last line (no newline, not JSON) is dropped (and cut
    from the file when `repair`). Any other bad line is an error."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    records, offset = [], 0
    for line_number, raw in enumerate(data.splitlines(keepends=True), start=1):
        torn = not raw.endswith(b"\n")
        try:
            if raw.strip():
                records.append(json.loads(raw))
        except json.JSONDecodeError as error:
            if not torn:
                raise ResultsMismatchError(
                    f"{path}:{line_number} is not valid JSON ({error.msg}); the results folder is damaged: "
                    "remove that line or choose another out_dir"
                ) from error
            if repair:
                with open(path, "r+b") as handle:
                    handle.truncate(offset)
            break
        offset += len(raw)
    return records


def append_json_line(path: Path, record: dict[str, Any]) -> None:
    """Append `record` to a JSON-lines file as one line, synced to disk before returning."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(_dumps(record) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


class ResultStore:
    """The records and cell summaries of one results folder."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.examples_path = self.directory / EXAMPLES_FILE
        self.cells_path = self.directory / CELLS_FILE
        self._records: dict[CellKey, dict[str, dict[str, Any]]] = {}
        for record in read_json_lines(self.examples_path, repair=True):
            self._records.setdefault(cell_key(record), {})[record["example_id"]] = record
        self._cells: dict[CellKey, dict[str, Any]] = {
            cell_key(cell): cell for cell in read_json_lines(self.cells_path, repair=False)
        }

    def check(self, key: CellKey, fingerprint: str) -> None:
        """Refuse a cell whose stored results were made with other settings."""
        stored = {record["fingerprint"] for record in self._records.get(key, {}).values()}
        if key in self._cells:
            stored.add(self._cells[key]["fingerprint"])
        if stored - {fingerprint}:
            mode, task, length = key
            raise ResultsMismatchError(
                f"{self.directory} holds results of mode {mode!r} on task {task!r} at length {length} made with "
                "other settings (pipeline, models, task options, seed or recall settings); use another out_dir, "
                f"or remove that folder to start over"
            )

    def check_models(self, identity: dict[str, Any]) -> None:
        """Record the models of this run; refuse a folder whose results came from other models.

        A weights name such as ``auto`` does not say which weights loaded (the shipped ones change
        when a new memory is shipped), so the memory weights are compared by their hash.
        """
        path = self.directory / MODELS_FILE
        if path.is_file() and (self._records or self._cells):
            recorded = json.loads(path.read_text(encoding="utf-8"))
            changed = sorted(key for key in set(recorded) | set(identity) if recorded.get(key) != identity.get(key))
            if changed:
                differences = "; ".join(f"{key}: {recorded.get(key)!r} then, {identity.get(key)!r} now"
                                        for key in changed)
                raise ResultsMismatchError(
                    f"{self.directory} holds results made with other models ({differences}); use another "
                    "out_dir, or remove that folder to start over"
                )
        atomic_write_text(path, json.dumps(identity, indent=1, sort_keys=True) + "\n")

    def is_finished(self, key: CellKey, fingerprint: str, requested: int) -> bool:
        cell = self._cells.get(key)
        return cell is not None and cell["fingerprint"] == fingerprint and cell["requested"] == requested

    def has(self, key: CellKey, example_id: str) -> bool:
        return example_id in self._records.get(key, {})

    def add(self, record: dict[str, Any]) -> None:
        """Append one example's record and make it durable before going on."""
        append_json_line(self.examples_path, record)
        self._records.setdefault(cell_key(record), {})[record["example_id"]] = record

    def records(self, key: CellKey, example_ids: list[str] | None = None) -> list[dict[str, Any]]:
        """A cell's records (those of `example_ids`, in that order, when given)."""
        stored = self._records.get(key, {})
        if example_ids is None:
            return list(stored.values())
        return [stored[example_id] for example_id in example_ids if example_id in stored]

    def finish(self, cell: dict[str, Any]) -> None:
        self._cells[cell_key(cell)] = cell
        atomic_write_text(self.cells_path, "".join(_dumps(c) + "\n" for c in self._cells.values()))

    def cells(self) -> list[dict[str, Any]]:
        return list(self._cells.values())
