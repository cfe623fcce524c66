"""Per question of an evaluation run: which gold sentences each mode's evidence held, and whether the
clue-driven modes' evidence holds every gold sentence the rag mode's evidence held (a superset).

    python eval/evidence_superset.py --run results/eval/lite-side-by-side-2026-11-29
    python eval/evidence_superset.py --run runs/eval/lite-side-by-side --modes memorag memorag-lite

The run folder holds an `eval/run.py` output (config.yaml, examples.jsonl). Its questions are built
again from config.yaml (the same seeded builder, so the same contexts and gold sentences; a question
whose count disagrees with the recorded recall stops the script) and each record's evidence spans
are matched against the gold sentences as the harness's recall does (`memorag.evaluation.recall`).
Two rag references are compared: rag's whole evidence as the run gave it, and rag's `--query-hits`
best-scored chunks, the query's own hits that the reference evidence rule gives the clue-driven
modes (`hits_per_query`, 6 by default). Writes superset.md and superset.json into the run folder.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memorag.evaluation import load_eval_config
from memorag.evaluation import recall as recall_lib
from memorag.evaluation.datasets.schema import CorpusTask
from memorag.storage.io import atomic_write_text

QuestionKey = tuple[str, int | None, str]  # task, length, example id


def found_sentences(units: recall_lib.GoldUnits, evidence: Sequence[list], k: int | None,
                    coverage: float) -> list[int]:
    """Indices of the fine gold units that the `k` best-scored evidence spans (all: None) hold."""
    spans = recall_lib.top_k([((doc_id, start, end), score) for doc_id, start, end, score in evidence], k)
    return [number for number, unit in enumerate(units.fine)
            if any(recall_lib.region_found(region, spans, unit.whole, coverage) for region in unit.regions)]


def check_against_record(found: Sequence[int], units: recall_lib.GoldUnits, record: dict[str, Any]) -> None:
    """The gold sentences found must give the recall the harness recorded: else the questions were
    built differently from the run's (another data file, another builder) and nothing here holds."""
    recorded = record["recall"].get("recall@all")
    if units.fine and recorded is not None and abs(len(found) / len(units.fine) - recorded) > 1e-9:
        raise SystemExit(f"{record['mode']} on {record['example_id']} ({record['task']} at "
                         f"{record['length']}): {len(found)} of {len(units.fine)} gold sentences found here, "
                         f"recall@all {recorded} recorded; the questions built from config.yaml are not the run's")


def gold_of_run(run: Path, recorded: set[tuple[str, int | None]]) -> dict[QuestionKey, recall_lib.GoldUnits]:
    """Each question's gold units, built again from the run's config for the `recorded` (task, length)s."""
    from memorag.evaluation.runner import EvalRunner  # loads the models' libraries: only when building

    config = load_eval_config(str(run / "config.yaml"), [])
    runner = EvalRunner(config)
    gold = {}
    for task in config.tasks:
        as_documents = task.memorize == "documents"
        for length in config.task_lengths(task):
            if (task.name, length) not in recorded:
                continue
            data = runner.build(task, length, config.task_num_examples(task))
            if isinstance(data, CorpusTask):
                raise SystemExit(f"task {task.name!r} is a shared corpus; this script reads per-question tasks")
            for example in data:
                gold[(task.name, length, example.id)] = recall_lib.gold_units(example.gold_evidence, as_documents)
    return gold


def compare(run: Path, modes: Sequence[str], base: str, query_hits: int,
            coverage: float) -> list[dict[str, Any]]:
    """One row per question the base mode answered: gold sentences found by each evidence."""
    records = [json.loads(line) for line in (run / "examples.jsonl").read_text(encoding="utf-8").splitlines()]
    by_key = {(r["mode"], r["task"], r["length"], r["example_id"]): r for r in records}
    gold = gold_of_run(run, {(task, length) for _, task, length, _ in by_key})
    rows = []
    for (mode, task, length, example_id), record in sorted(by_key.items(), key=lambda item: str(item[0])):
        if mode != base:
            continue
        units = gold[(task, length, example_id)]
        own = found_sentences(units, record["evidence"], None, coverage)
        check_against_record(own, units, record)
        row: dict[str, Any] = {"task": task, "length": length, "example_id": example_id,
                               "row": record["source_row"], "gold": len(units.fine), base: own,
                               f"{base}@{query_hits}": found_sentences(units, record["evidence"], query_hits,
                                                                       coverage)}
        for name in modes:
            other = by_key.get((name, task, length, example_id))
            if other is None:
                continue
            held = found_sentences(units, other["evidence"], None, coverage)
            check_against_record(held, units, other)
            row[name] = held
            row[f"{name} holds {base}"] = set(row[base]) <= set(held)
            row[f"{name} holds {base}@{query_hits}"] = set(row[f"{base}@{query_hits}"]) <= set(held)
        rows.append(row)
    return rows


def table(rows: Sequence[dict[str, Any]], modes: Sequence[str], base: str, query_hits: int) -> str:
    """The per-question markdown table and a count line per mode."""
    head = ["task", "length", "row", "gold", base, f"{base}@{query_hits}"]
    for mode in modes:
        head += [mode, f"holds {base}", f"holds {base}@{query_hits}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["task"], str(row["length"]), str(row["row"]), str(row["gold"]),
                 str(len(row[base])), str(len(row[f"{base}@{query_hits}"]))]
        for mode in modes:
            if mode not in row:
                cells += ["-", "-", "-"]
                continue
            cells += [str(len(row[mode])), "yes" if row[f"{mode} holds {base}"] else "**no**",
                      "yes" if row[f"{mode} holds {base}@{query_hits}"] else "**no**"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for mode in modes:
        asked = [row for row in rows if mode in row]
        for reference in (base, f"{base}@{query_hits}"):
            held = sum(row[f"{mode} holds {reference}"] for row in asked)
            lines.append(f"- {mode} holds every gold sentence {reference} held: {held} of {len(asked)} questions")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True,
                        help="an eval/run.py output folder (config.yaml, examples.jsonl)")
    parser.add_argument("--modes", nargs="+", default=["memorag", "memorag-lite"],
                        help="the modes compared to --base")
    parser.add_argument("--base", default="rag", help="the mode whose gold sentences must be kept (default rag)")
    parser.add_argument("--query-hits", type=int, default=None,
                        help="the base's best chunks that stand for the query's own hits (default: the run's "
                             "hits_per_query, how deep the query retrieves under the reference rule)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    for name in ("config.yaml", "examples.jsonl"):
        if not (args.run / name).is_file():
            raise SystemExit(f"{args.run / name} is missing: pass --run with an eval/run.py output folder")
    config = load_eval_config(str(args.run / "config.yaml"), [])
    query_hits = args.query_hits or config.pipeline.hits_per_query
    rows = compare(args.run, args.modes, args.base, query_hits, config.span_coverage)
    text = table(rows, args.modes, args.base, query_hits)
    intro = (f"Gold sentences (HotpotQA supporting facts) each mode's evidence held, per question; "
             f"`{args.base}@{query_hits}` is {args.base}'s {query_hits} best-scored chunks (the "
             f"query's own hits under the reference evidence rule). Written by eval/evidence_superset.py.\n\n")
    atomic_write_text(args.run / "superset.md", intro + text)
    atomic_write_text(args.run / "superset.json", json.dumps(rows, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
