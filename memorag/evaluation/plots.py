"""PNG plots of a run (matplotlib, Agg backend: no display needed).

- ``recall_vs_length.png``: recall of gold evidence (over all evidence given) against
  context length, one panel per task, one line per mode; cells where recall does
  not apply (no evidence by design) or whose length is "as given" are left out.
- ``quality_vs_tokens.png``: the task's score against the mean prompt tokens given to
  the generator, one panel per task, one marker per mode, one point per length;
  modes that never call the generator (no tokens) are left out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLOTS_DIR = "plots"


def _figure(num_panels: int):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    columns = min(3, num_panels)
    rows = -(-num_panels // columns)
    figure, axes = pyplot.subplots(rows, columns, figsize=(4.8 * columns, 3.6 * rows), squeeze=False)
    for extra in axes.flat[num_panels:]:
        extra.set_visible(False)
    return pyplot, figure, list(axes.flat)


def _tasks(cells: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(cell["task"] for cell in cells))


def _save(pyplot, figure, path: Path) -> Path:
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temporary, dpi=110)
    pyplot.close(figure)
    os.replace(temporary, path)
    return path


def recall_vs_length(cells: Sequence[dict[str, Any]], path: Path) -> Path | None:
    usable = [c for c in cells if c["length"] is not None and c["recall@all"] is not None]
    tasks = _tasks(usable)
    if not tasks:
        return None
    pyplot, figure, axes = _figure(len(tasks))
    for axis, task in zip(axes, tasks):
        for mode in dict.fromkeys(c["mode"] for c in usable if c["task"] == task):
            points = sorted((c["length"], c["recall@all"]) for c in usable if c["task"] == task and c["mode"] == mode)
            axis.plot([x for x, _ in points], [y for _, y in points], marker="o", label=mode)
        axis.set_xscale("log", base=2)
        axis.set_ylim(-5, 105)
        axis.set_title(task + (" (proxy)" if any(c["proxy"] for c in usable if c["task"] == task) else ""))
        axis.set_xlabel("context length (tokens)")
        axis.set_ylabel("recall of gold evidence (%)")
        axis.legend(fontsize="small")
    return _save(pyplot, figure, path)


def quality_vs_tokens(cells: Sequence[dict[str, Any]], path: Path) -> Path | None:
    usable = [c for c in cells if c["generator_tokens"] is not None]
    tasks = _tasks(usable)
    if not tasks:
        return None
    pyplot, figure, axes = _figure(len(tasks))
    markers = "osD^v<>px*"
    modes = list(dict.fromkeys(c["mode"] for c in usable))
    for axis, task in zip(axes, tasks):
        metrics = sorted({c["metric"] for c in usable if c["task"] == task})
        for index, mode in enumerate(modes):
            points = [c for c in usable if c["task"] == task and c["mode"] == mode]
            if not points:
                continue
            axis.scatter([c["generator_tokens"] for c in points], [c["score"] for c in points],
                         marker=markers[index % len(markers)], label=mode)
            for c in points:
                if c["length"] is not None:
                    axis.annotate(f"{c['length'] // 1024}K" if c["length"] >= 1024 else str(c["length"]),
                                  (c["generator_tokens"], c["score"]), fontsize="x-small",
                                  textcoords="offset points", xytext=(3, 3))
        axis.set_ylim(-5, 105)
        axis.set_title(task)
        axis.set_xlabel("generator prompt tokens per question")
        axis.set_ylabel(f"score ({', '.join(metrics)})")
        axis.legend(fontsize="small")
    return _save(pyplot, figure, path)


def write_plots(directory: str | os.PathLike[str], cells: Sequence[dict[str, Any]]) -> list[Path]:
    """Both plots under ``DIR/plots/`` (those with something to show); returns their paths."""
    folder = Path(directory) / PLOTS_DIR
    written = [recall_vs_length(cells, folder / "recall_vs_length.png"),
               quality_vs_tokens(cells, folder / "quality_vs_tokens.png")]
    return [path for path in written if path is not None]
