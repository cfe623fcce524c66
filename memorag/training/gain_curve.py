"""The held-out control against tokens trained: both shares per ratio, from committed evaluations.

A curve is a JSON list of points, each naming an evaluation JSON (`train/evaluate.py --out`)
and the training it measured as `[run, step]` pairs (stage 1, then stage 2 from its
weights). Tokens trained are the `tokens_seen` the runs' `train_log.jsonl` recorded at
those steps; the shares are recomputed from the evaluation's per-sequence NLLs
(`evaluate.gap_shares`), so an evaluation written before a share existed reports it too.
A ratio an evaluation never scored is reported as not evaluated, never filled in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .evaluate import FULL_CONTEXT, NO_MEMORY, gap_shares, memory_condition, other_text_condition

KINDS = ("net", "content")


@dataclass
class CurvePoint:
    label: str
    series: str  # points of one series are one line of the plot, in order of tokens
    eval_file: str
    tokens: int
    nll: dict[str, float] = field(default_factory=dict)  # mean NLL per condition
    shares: dict[int, dict[str, dict[str, float]]] = field(default_factory=dict)


def tokens_at(log_path: Path, step: int) -> int:
    """`tokens_seen` of the run at `step`: its `end` (or checkpoint state) record of that step."""
    for line in log_path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("step") == step and "tokens_seen" in record:
            return int(record["tokens_seen"])
    raise ValueError(f"{log_path} records no tokens_seen at step {step}")


def load_curve(spec_path: str | Path, runs_dir: str | Path) -> list[CurvePoint]:
    """The points of a curve spec; evaluation files are relative to the spec, runs to `runs_dir`."""
    spec_path, runs_dir = Path(spec_path), Path(runs_dir)
    points = []
    for entry in json.loads(spec_path.read_text(encoding="utf-8")):
        report = json.loads((spec_path.parent / entry["eval"]).read_text(encoding="utf-8"))
        tokens = sum(tokens_at(runs_dir / run / "train_log.jsonl", step) for run, step in entry.get("runs", []))
        nll = {name: score["mean_nll"] for name, score in report["conditions"].items() if score.get("mean_nll")}
        points.append(CurvePoint(entry["label"], entry.get("series", ""), entry["eval"], tokens, nll,
                                 gap_shares(report.get("per_sequence") or {})))
    return points


def _cell(point: CurvePoint, ratio: int, kind: str) -> str:
    pair = point.shares.get(ratio, {})
    if kind not in pair:
        return "not evaluated"
    share = pair[kind]
    return f"{share['share']:.1%} ({share['low']:.1%} .. {share['high']:.1%})"


def curve_table(points: Sequence[CurvePoint], ratios: Sequence[int]) -> str:
    """A markdown table: tokens, mean NLLs at the largest ratio, and both shares at each ratio."""
    top = max(ratios)
    head = ["weights", "tokens trained", f"own r={top}", f"other text r={top}", "no memory", "full context"]
    head += [f"{kind} share r={ratio}" for ratio in ratios for kind in KINDS]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * 5 + "---|" * (len(head) - 6)]
    for point in points:
        names = (memory_condition(top), other_text_condition(top), NO_MEMORY, FULL_CONTEXT)
        cells = [point.label, f"{point.tokens:,}"]
        cells += [f"{point.nll[name]:.4f}" if name in point.nll else "not evaluated" for name in names]
        cells += [_cell(point, ratio, kind) for ratio in ratios for kind in KINDS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curve_json(points: Sequence[CurvePoint]) -> list[dict[str, Any]]:
    return [{"label": p.label, "series": p.series, "eval": p.eval_file, "tokens": p.tokens, "mean_nll": p.nll,
             "shares": {f"r={ratio}": pair for ratio, pair in p.shares.items()}} for p in points]


def plot_curve(points: Sequence[CurvePoint], ratios: Sequence[int], path: str | Path, floor: float = -100.0) -> Path:
    """Both shares against tokens trained (symmetric-log axis: 0 tokens shows), one line per series, kind and
    evaluated ratio, 95% intervals as bars. Shares below `floor` % are drawn at the floor and named in a note."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(1, len(KINDS), figsize=(12, 5.5), sharey=True, squeeze=False)
    below = []
    for axis, kind in zip(axes[0], KINDS):
        for series in dict.fromkeys(p.series for p in points):
            members = sorted((p for p in points if p.series == series), key=lambda p: p.tokens)
            for ratio in ratios:
                shown = [p for p in members if kind in p.shares.get(ratio, {})]
                if not shown:
                    continue
                values = [p.shares[ratio][kind] for p in shown]
                below += [f"{p.label}, {kind} r={ratio}: {100 * v['share']:.0f}%"
                          for p, v in zip(shown, values) if 100 * v["share"] < floor]
                errors = [[100 * (v["share"] - v["low"]) for v in values], [100 * (v["high"] - v["share"]) for v in values]]
                axis.errorbar([p.tokens for p in shown], [max(100 * v["share"], floor) for v in values], yerr=errors,
                              marker="o", capsize=3, label=f"{series}, r={ratio}")
        axis.axhline(0, color="grey", linewidth=0.8)
        axis.set_xscale("symlog", linthresh=1e4)
        axis.set_xlim(0, 2 * max([p.tokens for p in points] + [1e4]))
        axis.set_title(f"{kind} share of the window-to-full gap")
        axis.set_xlabel("tokens trained")
    axes[0][0].set_ylabel("% of (no memory - full context), mean NLL")
    axes[0][0].set_ylim(bottom=floor - 5)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=2, fontsize=7)
    if below:
        figure.text(0.01, 0.99, "drawn at the floor: " + "; ".join(below), fontsize=7, va="top")
    figure.tight_layout(rect=(0, 0.05 + 0.018 * ((len(labels) + 1) // 2), 1, 0.96))
    path = Path(path)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return path
