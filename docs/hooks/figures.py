"""MkDocs hook: the site's figures, drawn at build time from the committed raw records.

A page asks for a figure with a line `<!-- figure: NAME -->` (a comment, so the page still reads on a code
host); the build puts the SVG there with its caption, which names the record, the machine and the date.
No number is typed here: every point is read from a file under `results/`, `memorag/weights/` or a tracked
training run under `runs/`, except
the public code's memorize times, which no record of ours holds (they are the figures the GPU-speed issue
quoted, and the caption says so). Run alone to look at them without building the site:

    python docs/hooks/figures.py --out /tmp/figures      # writes NAME.svg for every figure
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "memorag" / "weights" / "memory-smollm2-135m-instruct"
GPU_H100 = ROOT / "results" / "benchmarks" / "gpu-h100-2026-11-25"
COMPILED_H200 = ROOT / "results" / "benchmarks" / "compiled-windows-2026-11-26"
CPU_HOUR = ROOT / "results" / "eval" / "cpu-hour"
RLGF_RUN = ROOT / "runs" / "rlgf-smollm2-cpu"
MARKER = re.compile(r"^<!-- figure: ([a-z0-9-]+) -->$", re.M)
# The public beacon code (7ed43d6, transformers 4.47.1) on one H100, Qwen2-7B shape, r=4, as the
# GPU-speed issue gave them on 2026-11-24; not re-measured here (docs/results.md, "GPU").
PUBLIC_MEMORIZE_S = {16384: 2.39, 32768: 3.94, 65536: 7.10, 131072: 17.90}


@dataclass(frozen=True)
class Figure:
    name: str
    alt: str
    caption: str
    draw: Callable[[object], None]  # draws on a matplotlib Figure


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _memorize_rows(path: Path) -> dict[int, float]:
    return {row["tokens"]: row["seconds"] for row in _read(path)["results"] if row["mode"] == "memorize"}


def draw_gain_curve(figure) -> None:
    from memorag.training.gain_curve import load_curve

    points = load_curve(SHIPPED / "eval" / "curve.json", SHIPPED / "training_runs")
    axis = figure.subplots()
    for series in dict.fromkeys(point.series for point in points):
        shown = sorted((p for p in points if p.series == series and "net" in p.shares.get(8, {})),
                       key=lambda p: p.tokens)
        shares = [p.shares[8]["net"] for p in shown]
        axis.errorbar([p.tokens for p in shown], [100 * max(s["share"], -1.0) for s in shares],
                      yerr=[[100 * (s["share"] - s["low"]) if s["share"] > -1 else 0 for s in shares],
                            [100 * (s["high"] - s["share"]) if s["share"] > -1 else 0 for s in shares]],
                      marker="o", capsize=3, label=series)
    axis.axhline(0, color="grey", linewidth=0.8)
    axis.set_xscale("symlog", linthresh=1e4)
    axis.set_xlim(0, 2 * max(point.tokens for point in points))
    axis.set_ylim(-105, 100)
    axis.set_xlabel("tokens trained (0, then log scale)")
    axis.set_ylabel("% of the loss gap closed (r=8)")
    axis.set_title("Share of the no-memory to full-context loss gap the memory closes")
    axis.legend(fontsize=8, loc="lower right")


def draw_memorize_time(figure) -> None:
    eager = _memorize_rows(GPU_H100 / "memorize-7b.json")
    compiled = {**_memorize_rows(COMPILED_H200 / "call1" / "memorize-7b-compiled.json"),
                **_memorize_rows(COMPILED_H200 / "call3" / "memorize-7b-16k-64k-compiled.json")}
    axis = figure.subplots()
    for label, rows, style in (("this project, eager (H100)", eager, "o-"),
                               ("this project, compiled windows (H200)", compiled, "s-"),
                               ("public beacon code (H100, quoted, not measured here)", PUBLIC_MEMORIZE_S, "^--")):
        lengths = sorted(rows)
        axis.plot(lengths, [rows[n] for n in lengths], style, label=label)
    axis.set_xscale("log", base=2)
    axis.set_xticks(sorted(PUBLIC_MEMORIZE_S), [f"{n // 1024}K" for n in sorted(PUBLIC_MEMORIZE_S)])
    axis.set_xlabel("context length, tokens")
    axis.set_ylabel("seconds to memorize")
    axis.set_title("Memorize time, Qwen2-7B shape, bf16, window 1024, r=4")
    axis.legend(fontsize=8)


def draw_ratio(figure) -> None:
    points = {point["label"]: point for point in _read(SHIPPED / "eval" / "gain-curve.json")}
    shipped = next(p for label, p in points.items() if "then 30 SFT steps" in label)
    plain = {shape: next(row["kv_bytes_per_token"] for row in _read(GPU_H100 / f"memorize-{shape}.json")["results"]
                         if row["mode"] == "plain") for shape in ("135m", "7b")}
    ratios = sorted(int(key.split("=")[1]) for key in shipped["shares"])
    size_axis, quality_axis = figure.subplots(1, 2)
    for shape, label in (("7b", "Qwen2-7B shape"), ("135m", "SmolLM2-135M shape")):
        size_axis.plot([1, *ratios], [plain[shape] / r / 1024 for r in (1, *ratios)], "o-", label=label)
    size_axis.set_xscale("log", base=2)
    size_axis.set_xticks([1, *ratios], ["1 (plain KV)", *map(str, ratios)])
    size_axis.set_xlabel("compression ratio r")
    size_axis.set_ylabel("KiB of memory per input token (bf16)")
    size_axis.set_title("Memory size")
    size_axis.legend(fontsize=8)
    for kind, label in (("net", "net share"), ("content", "content share")):
        values = [shipped["shares"][f"r={r}"][kind] for r in ratios]
        quality_axis.errorbar(ratios, [100 * v["share"] for v in values],
                              yerr=[[100 * (v["share"] - v["low"]) for v in values],
                                    [100 * (v["high"] - v["share"]) for v in values]],
                              marker="o", capsize=3, label=label)
    quality_axis.set_xscale("log", base=2)
    quality_axis.set_xticks(ratios, map(str, ratios))
    quality_axis.set_ylim(0, 60)
    quality_axis.set_xlabel("compression ratio r")
    quality_axis.set_ylabel("% of the loss gap closed")
    quality_axis.set_title("Quality, shipped memory (135M)")
    quality_axis.legend(fontsize=8)


def draw_modes(figure) -> None:
    cells = [json.loads(line) for line in (CPU_HOUR / "cells.jsonl").read_text(encoding="utf-8").splitlines()]
    modes = list(dict.fromkeys(cell["mode"] for cell in cells))
    names = [mode.replace("memorag:qa", "memory alone") for mode in modes]
    axes = figure.subplots(1, 2, sharey=True)
    for axis, (family, title) in zip(axes, (("niah", "RULER needles (4K, 8K)"), ("hotpotqa", "HotpotQA (4K, 8K, 16K corpus)"))):
        chosen = [cell for cell in cells if cell["task"].startswith(family)]
        for offset, (field, label) in ((-0.2, ("score", "answer score")), (0.2, ("recall@all", "evidence recall"))):
            means = []
            for mode in modes:
                values = [cell[field] for cell in chosen if cell["mode"] == mode and cell.get(field) is not None]
                means.append(sum(values) / len(values) if values else 0.0)
            axis.bar([i + offset for i in range(len(modes))], means, width=0.4, label=label)
        axis.set_xticks(range(len(modes)), names, rotation=45)
        axis.set_title(title)
    axes[0].set_ylabel("mean over the cells, x 100")
    axes[0].legend(fontsize=8)


def _trailing_mean(values: list[float], width: int) -> list[float]:
    return [sum(values[max(0, i + 1 - width):i + 1]) / (i + 1 - max(0, i + 1 - width)) for i in range(len(values))]


def draw_rlgf_training(figure) -> None:
    log = [json.loads(line) for line in (RLGF_RUN / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    steps = {row["step"]: row for row in log if row.get("event") == "train"}
    rows = [steps[step] for step in sorted(steps)]
    x = [row["step"] for row in rows]
    loss_axis, reward_axis = figure.subplots(1, 2)
    loss_axis.plot(x, [row["loss"] for row in rows], color="0.75", linewidth=0.8, label="each step (4 pairs)")
    loss_axis.plot(x, _trailing_mean([row["loss"] for row in rows], 20), label="mean of the last 20 steps")
    loss_axis.axhline(0.6931, color="0.3", linestyle="--", linewidth=0.8, label="log 2 (no preference)")
    loss_axis.set_xlabel("optimizer step")
    loss_axis.set_ylabel("DPO loss")
    loss_axis.set_title("Loss on each step's pairs, before its update")
    loss_axis.legend(fontsize=8)
    accuracy = _trailing_mean([100 * row["reward_accuracy"] for row in rows], 20)
    reward_axis.plot(x, accuracy, label="chosen set ranked above the rejected (last 20 steps)")
    reward_axis.axhline(50, color="0.3", linestyle="--", linewidth=0.8, label="chance")
    reward_axis.set_ylim(0, 100)
    reward_axis.set_xlabel("optimizer step")
    reward_axis.set_ylabel("% of the pairs")
    reward_axis.set_title("Pairs seen for the first time (one epoch)")
    reward_axis.legend(fontsize=8)


FIGURES = (
    Figure("gain-curve", "The memory's gain curve",
           "Share of the window-to-full-context loss gap closed (mean NLL, held-out text, r=8, 95% bootstrap "
           "intervals; shares below -100% drawn at -100%) against tokens trained, for every training run of the "
           "shipped 135M memory: CPU runs (2-core Intel Xeon, 2026-11-23 to 2026-11-25) and GPU runs (one H100, "
           "2026-11-25; one H200, 2026-11-26). Record: `memorag/weights/memory-smollm2-135m-instruct/eval/` "
           "(`curve.json` and the evaluations it names) and `training_runs/`.", draw_gain_curve),
    Figure("memorize-time", "Memorize time against context length",
           "Seconds to memorize a context, Qwen2-7B shape with random weights, bf16, window 1024, r=4. This "
           "project: eager on one NVIDIA H100 80GB HBM3, 2026-11-25 (`results/benchmarks/gpu-h100-2026-11-25/"
           "memorize-7b.json`), and through compiled windows on one NVIDIA H200, 2026-11-26 "
           "(`results/benchmarks/compiled-windows-2026-11-26/`, call1 and call3). The public beacon code's "
           "times were measured once, on one H100 on 2026-11-24 (transformers 4.47.1), and have no record "
           "under `results/`; they are not re-measured here.",
           draw_memorize_time),
    Figure("compression-ratio", "Memory size and quality against the compression ratio",
           "Left: bytes of memory per input token, the plain key-value cache's size (from `benchmarks/memorize.py`'s "
           "plain rows, `results/benchmarks/gpu-h100-2026-11-25/memorize-{7b,135m}.json`, one H100, 2026-11-25) "
           "divided by r. Right: the shipped memory's share of the loss gap closed at r=2, 4 and 8 (held-out "
           "text, 95% bootstrap intervals; net: against no memory, content: against the memory of another text), "
           "evaluated on one H200, 2026-11-26: `memorag/weights/memory-smollm2-135m-instruct/eval/"
           "control-sft-mix-30.json`.", draw_ratio),
    Figure("modes", "Each mode's answer score and evidence recall",
           "Every mode on the same questions with the embedded models (SmolLM2-135M-Instruct reader and memory, "
           "MiniLM embedder): the mean answer score (RULER string match, or HotpotQA F1) and the mean recall of "
           "the gold evidence in what the generator read, over the needle cells and the HotpotQA cells "
           "(5 questions a cell, 16 for the corpus; the memory alone gives no evidence, so it has no recall bar). A proxy on a "
           "135M reader, 2-core Intel Xeon, 2026-11-24: `results/eval/cpu-hour/cells.jsonl`.", draw_modes),
    Figure("rlgf-training", "RLGF's CPU run: loss and preference accuracy per step",
           "RLGF's CPU run (`configs/rlgf/smollm2-cpu.yaml`: from the shipped memory, DPO on 1,116 of its 1,119 "
           "preference pairs of 4K-token HotpotQA tuning questions, one epoch of 279 steps of 4 pairs, bf16, two DDP "
           "processes), per optimizer step: the DPO loss and the share of pairs whose chosen clue set the "
           "model ranked above the rejected one, both on the step's own pairs before its update, so on pairs "
           "it had not trained on. The references were recorded in float32, so the first step's margins "
           "carry a small precision offset (docs/training.md). 2-core Intel Xeon (AMX), 2026-12-07. Record: "
           "`runs/rlgf-smollm2-cpu/train_log.jsonl` (a resumed step drawn from its last record).",
           draw_rlgf_training),
)


def render(figure_spec: Figure) -> bytes:
    """The figure as SVG bytes, the same bytes on every build of the same records."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    with matplotlib.rc_context({"svg.hashsalt": "memorag-figures", "font.size": 9}):
        figure = pyplot.figure(figsize=(9, 4.6), layout="constrained")
        figure_spec.draw(figure)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        pyplot.close(figure)
    return buffer.getvalue()


def on_files(files, config):
    from mkdocs.structure.files import File

    for spec in FIGURES:
        files.append(File.generated(config, f"figures/{spec.name}.svg", content=render(spec)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    specs = {spec.name: spec for spec in FIGURES}
    page_dir = os.path.dirname(page.file.src_uri)

    def place(match: re.Match) -> str:
        spec = specs.get(match[1])
        if spec is None:
            raise ValueError(f"{page.file.src_uri} asks for figure {match[1]!r}; known: {', '.join(specs)}")
        source = os.path.relpath(f"figures/{spec.name}.svg", page_dir or ".").replace(os.sep, "/")
        return f"![{spec.alt}]({source})\n\n*Figure: {spec.caption}*"

    return MARKER.sub(place, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder the SVGs are written to")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for spec in FIGURES:
        (args.out / f"{spec.name}.svg").write_bytes(render(spec))
        print(args.out / f"{spec.name}.svg")


if __name__ == "__main__":
    main()
