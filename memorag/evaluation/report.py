"""The markdown report of a run: a quality table and a cost table, one row per cell."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memorag.benchmarking.machine import cpu_model
from memorag.storage.io import atomic_write_text

REPORT_FILE = "results.md"
_STAGE_ORDER = ("clues", "retrieve", "generate", "total")


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _length(value: int | None) -> str:
    if value is None:
        return "as given"
    return f"{value // 1024}K" if value % 1024 == 0 else str(value)


def machine_description() -> str:
    """The machine a run ran on: OS, processor, CPU count, torch threads and device (no host name)."""
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU only"
    return (f"{platform.system()} {platform.machine()} ({cpu_model()}), {os.cpu_count()} CPUs, torch {torch.__version__} "
            f"with {torch.get_num_threads()} threads, {device}")


def _stages(cells: Sequence[dict[str, Any]]) -> list[str]:
    found = {stage for cell in cells for stage in cell["time_s"]}
    ordered = [stage for stage in _STAGE_ORDER if stage in found]
    return sorted(found - set(ordered)) + ordered


def quality_table(cells: Sequence[dict[str, Any]], ks: Sequence[int]) -> str:
    columns = ["task", "length", "mode", "n", "context tokens", "metric", "score", "answered %", "recall@all",
               *[f"recall@{k}" for k in ks], "doc recall@all", "evidence tokens", "generator tokens",
               "evidence order", "answer prompt"]
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "---|" * 3 + "---:|" * 2 + "---|" + "---:|" * (len(columns) - 8) + "---|" * 2]
    for cell in cells:
        task = cell["task"] + (" *" if cell["proxy"] else "")
        row = [task, _length(cell["length"]), cell["mode"], str(cell["n"]), _fmt(cell["context_tokens"], 0),
               cell["metric"], _fmt(cell["score"], 2), _fmt(cell.get("answered")),
               _fmt(cell["recall@all"]), *[_fmt(cell[f"recall@{k}"]) for k in ks], _fmt(cell["doc_recall@all"]),
               _fmt(cell.get("evidence_tokens"), 0), _fmt(cell["generator_tokens"], 0),
               cell.get("evidence_order", "n/a").replace("None", "n/a"),
               cell.get("answer_prompt", "n/a")]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def cost_table(cells: Sequence[dict[str, Any]]) -> str:
    stages = _stages(cells)
    columns = ["task", "length", "mode", "index s", "memory s", *[f"{stage} s" for stage in stages],
               "peak RSS MB (index / memory / ask)"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * 3 + "---:|" * (len(columns) - 3)]
    for cell in cells:
        peak = cell["peak_rss_mb"]
        row = [cell["task"], _length(cell["length"]), cell["mode"], _fmt(cell["index_s"], 2),
               _fmt(cell["memory_s"], 2), *[_fmt(cell["time_s"].get(stage), 2) for stage in stages],
               " / ".join(_fmt(peak[stage], 0) for stage in ("index", "memory", "ask"))]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def models_line(models: dict[str, Any]) -> str:
    """The report's line naming the models (see ``EvalRunner.models_identity``)."""
    digest = models.get("memory_weights_sha256")
    weights = f"{models.get('memory_weights')}" + (f", sha256 of the parameters {digest[:16]}..." if digest else "")
    return (f"- models: memory model {models.get('memory_model')} with memory weights {weights}; "
            f"generator {models.get('generator')}; embedder {models.get('embedder')} (all in models.json)")


def write_report(directory: str | os.PathLike[str], cells: Sequence[dict[str, Any]], ks: Sequence[int], *,
                 command: str, plots: Sequence[Path] = (), models: dict[str, Any] | None = None) -> Path:
    """Write ``results.md`` beside the results; returns its path. `models`: the runner's models record."""
    scope = {cell["rss_scope"] for cell in cells}
    parts = [
        "# Evaluation results",
        "",
        f"- command: `{command}`",
        f"- written: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"- machine: {machine_description()}",
        *([models_line(models)] if models else []),
        "- score: the example's metric, mean x 100; recall: share of gold evidence units found in the evidence "
        "given to the generator (all of it, or its k best-scored pieces), x 100; n/a: the mode gave no "
        "evidence by design (e.g. the memory answering alone); answered %: share of replies that were an answer "
        "(not empty, not the question repeated); evidence tokens: mean tokens of the evidence the generator read "
        "per question (the cost of that recall and score); generator tokens: mean prompt tokens per question",
        "- tasks marked * are generated or constructed (proxies): not comparable with published figures",
        "",
        "## Quality",
        "",
        quality_table(cells, ks),
        "",
        "## Cost",
        "",
        "Seconds: index and memory are per memorized context (a memory is charged only to modes that need it); "
        "the other stages are per question. Peak RSS is of the whole process during the stage"
        + (" (the process's peak so far: the per-stage reset was not available)" if "process" in scope else "")
        + ".",
        "",
        cost_table(cells),
    ]
    if plots:
        parts += ["", "## Plots", ""] + [f"![{Path(path).stem}]({os.path.relpath(path, directory)})" for path in plots]
    return atomic_write_text(Path(directory) / REPORT_FILE, "\n".join(parts) + "\n")
