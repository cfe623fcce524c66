"""The gains over the query of every clue-recall record in a folder, with 95% bootstrap intervals.

    python eval/clue_gains.py                     # results/eval/clue-recall: writes gains.md and gains.json there
    python eval/clue_gains.py --records DIR       # another folder of eval/generate_clues.py outputs
    python eval/clue_gains.py --compare A.jsonl B.jsonl --out OUT   # two runs on the same questions

With --compare, two `eval/generate_clues.py` outputs on the same questions (two checkpoints, say) are compared
question by question (`memorag.evaluation.clue_recall.compare_records`): B's recall minus A's for the
clue-driven rankings, with 95% bootstrap intervals over the questions, and the questions each found more of;
OUT.md and OUT.json are written.

Each `*.jsonl` here is an `eval/generate_clues.py` output; its summary is recomputed from the
records by `memorag.evaluation.clue_recall.summarize` (the paired gains of the clue-driven rankings
over the query's, bootstrap over questions), so records written before the gains were part of the
summary get them too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memorag.evaluation.clue_recall import compare_records, summarize
from memorag.storage.io import atomic_write_text

RECORDS = Path(__file__).resolve().parents[1] / "results" / "eval" / "clue-recall"
K = 3


def cell(gain: dict) -> str:
    return f"{gain['points']:+.1f} [{gain['low']:+.1f}, {gain['high']:+.1f}]"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=RECORDS,
                        help="folder of eval/generate_clues.py outputs (*.jsonl); gains.md and gains.json go there")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("A", "B"),
                        help="two eval/generate_clues.py outputs on the same questions: B's recall minus A's")
    parser.add_argument("--out", type=Path, help="with --compare: OUT.md and OUT.json are written")
    args = parser.parse_args(argv)
    if args.out and not args.compare:
        parser.error("--out goes with --compare")
    return args


def read_records(path: Path) -> list[dict]:
    if not path.is_file():
        raise SystemExit(f"{path}: no such file (an eval/generate_clues.py output, OUT.jsonl)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compare(a: Path, b: Path, out: Path | None) -> None:
    try:
        result = compare_records(read_records(a), read_records(b), K)
    except ValueError as error:
        raise SystemExit(f"{a} against {b}: {error}") from None
    lines = [f"B - A in recall@{K} x 100 (95% bootstrap interval over the {result['n']} questions); questions B "
             f"found more / less / the same of. A: {a}; B: {b} (written by eval/clue_gains.py --compare).", "",
             "| evidence | ranking | B - A [95%] | better / worse / same |", "|---|---|---|---|"]
    for field, label in (("recall", "sentences"), ("doc_recall", "documents")):
        for name in ("clues", "query+clues"):
            counts = " / ".join(str(count) for count in result[f"{field}@{K} {name}: better / worse / same"])
            lines.append(f"| {label} | {name} | {cell(result[f'{field}@{K} {name}: B - A'])} | {counts} |")
    text = "\n".join(lines) + "\n"
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out.with_suffix(".md"), text)
        atomic_write_text(out.with_suffix(".json"), json.dumps({"a": str(a), "b": str(b), **result}, indent=2) + "\n")
    print(text, end="")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.compare:
        compare(*args.compare, args.out)
        return
    folder = args.records
    if not any(folder.glob("*.jsonl")):
        raise SystemExit(f"no *.jsonl records in {folder}: pass --records with a folder of eval/generate_clues.py outputs")
    summaries = {}
    for path in sorted(folder.glob("*.jsonl")):
        records = read_records(path)
        summaries[path.name] = {"clue_source": records[0].get("clue_source", "memory"), **summarize(records, K)}
    lines = ["| records | clues from | n | query | clues | query+clues | query+clues - query [95%] "
             "| documents: query | query+clues | - query [95%] |", "|---|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for name, s in summaries.items():
        lines.append(f"| {name} | {s['clue_source']} | {s['n']} | {s[f'recall@{K} query']:.1f} "
                     f"| {s[f'recall@{K} clues']:.1f} | {s[f'recall@{K} query+clues']:.1f} "
                     f"| {cell(s[f'recall@{K} query+clues - query'])} | {s[f'doc_recall@{K} query']:.1f} "
                     f"| {s[f'doc_recall@{K} query+clues']:.1f} | {cell(s[f'doc_recall@{K} query+clues - query'])} |")
    table = "\n".join(lines)
    atomic_write_text(folder / "gains.md", f"Recall@{K} x 100 of the supporting sentences, then of the documents; "
                                         "gains in points with 95% bootstrap intervals over questions "
                                         "(written by eval/clue_gains.py).\n\n" + table + "\n")
    atomic_write_text(folder / "gains.json", json.dumps(summaries, indent=2) + "\n")
    print(table)


if __name__ == "__main__":
    main()
