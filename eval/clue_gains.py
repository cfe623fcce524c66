"""The gains over the query of every clue-recall record in a folder, with 95% bootstrap intervals.

    python eval/clue_gains.py                     # results/eval/clue-recall: writes gains.md and gains.json there
    python eval/clue_gains.py --records DIR       # another folder of eval/generate_clues.py outputs

Each `*.jsonl` here is an `eval/generate_clues.py` output; its summary is recomputed from the
records by `memorag.evaluation.clue_recall.summarize` (the paired gains of the clue-driven rankings
over the query's, bootstrap over questions), so records written before the gains were part of the
summary get them too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memorag.evaluation.clue_recall import summarize
from memorag.storage.io import atomic_write_text

RECORDS = Path(__file__).resolve().parents[1] / "results" / "eval" / "clue-recall"
K = 3


def cell(gain: dict) -> str:
    return f"{gain['points']:+.1f} [{gain['low']:+.1f}, {gain['high']:+.1f}]"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=RECORDS,
                        help="folder of eval/generate_clues.py outputs (*.jsonl); gains.md and gains.json go there")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    folder = parse_args(argv).records
    if not any(folder.glob("*.jsonl")):
        raise SystemExit(f"no *.jsonl records in {folder}: pass --records with a folder of eval/generate_clues.py outputs")
    summaries = {}
    for path in sorted(folder.glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines()]
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
