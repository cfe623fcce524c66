"""How often the clues name the gold answer: for each record here, the questions (yes/no ones left
out) whose clues contain the gold answer as whole words, case and punctuation ignored.

    python eval/clue_answer_named.py                  # results/eval/clue-recall: prints, writes answer_named.json there
    python eval/clue_answer_named.py --records DIR    # another folder of eval/generate_clues.py outputs

The gold answers are read from the `answer`-source records (each holds its question's answer as its
one clue), so only records over the same questions as one of those are counted.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from memorag.storage.io import atomic_write_text

RECORDS = Path(__file__).resolve().parents[1] / "results" / "eval" / "clue-recall"


def words(text: str) -> str:
    return " " + re.sub(r"\W+", " ", text.lower()).strip() + " "


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=RECORDS,
                        help="folder of eval/generate_clues.py outputs (*.jsonl); answer_named.json goes there")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    folder = parse_args(argv).records
    gold = {record["id"]: record["clues"][0] for path in sorted(folder.glob("*.jsonl"))
            for record in read(path) if record.get("clue_source") == "answer"}
    result = {}
    if not gold:
        raise SystemExit(f"no answer-source records in {folder}: pass --records with a folder that has "
                         "an eval/generate_clues.py --clue-source answer output")
    for path in sorted(folder.glob("*.jsonl")):
        records = read(path)
        if records[0].get("clue_source") == "answer" or not all(r["id"] in gold for r in records):
            continue
        asked = [r for r in records if words(gold[r["id"]]).strip() not in ("yes", "no")]
        named = sum(any(words(gold[r["id"]]) in words(clue) for clue in r["clues"]) for r in asked)
        result[path.name] = {"questions": len(records), "not yes/no": len(asked), "answer named": named}
        print(f"{path.name}: the clues name the gold answer for {named} of {len(asked)} questions "
              f"({len(records) - len(asked)} yes/no left out)")
    atomic_write_text(folder / "answer_named.json", json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
