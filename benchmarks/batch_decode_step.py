"""Where an ask's time goes, and what decoding N asks as one batch costs against N asks alone.

    python benchmarks/batch_decode_step.py --sizes 1 2 4 8 --json results/benchmarks/NAME/batch_cost.json

With the embedded models (the memory model, and the generator that shares its base), a
corpus of the demo text is memorized and one `memorag` ask and one `rag` ask are answered,
their stages timed (`Answer.timings`). The prompts the two models decoded for them are
caught on the way (the memory model's clue prompts, the generator's answer prompt), then
for each N the same prompts, N copies of each, go through `DecodeBatch` as the server's
batcher runs them (memorag/runtime/decode_loop.py over memorag/generation/batched.py and memorag/memory/decoding.py): every prompt
prefilled alone as it joins, then steps of all rows together until each stops or reaches
its budget (`--clue-tokens`, `--answer-tokens`; stop tokens are ignored here so each N
decodes the same number of steps). Each row records prefill seconds, decoding seconds and
steps, and `decode_saving` = N x (the decoding of one) / (the decoding of N): what batching
saves on the steps. Prefill is not shared: a prompt's tokens cost the same alone or in a
batch, so N prompts cost N prefills. Prints a table; writes JSON with `--json`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "examples" / "kjv_ruth_esther_jonah.txt"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8], help="batch sizes (default 1 2 4 8)")
    parser.add_argument("--chars", type=int, default=2000, help="characters of the demo text memorized (default 2000)")
    parser.add_argument("--clue-tokens", type=int, default=16, help="steps of each clue prompt (default 16)")
    parser.add_argument("--answer-tokens", type=int, default=32, help="steps of the answer prompt (default 32)")
    parser.add_argument("--json", type=Path, help="write the record here")
    args = parser.parse_args(argv)
    if min(args.sizes) < 1 or min(args.chars, args.clue_tokens, args.answer_tokens) < 1:
        parser.error("sizes, --chars and the token counts must be at least 1")
    return args


class PromptCatcher:
    """Stands in for one of the server's batches for one ask (a `SharedBatch`): keeps the prompts, decodes
    them alone as the model would."""

    def __init__(self, batch: str, decode_alone):
        self.batch, self.decode_alone = batch, decode_alone
        self.prompts: list = []

    def decode(self, prompts, max_new_tokens: int, on_token=None):
        self.prompts.extend(prompts)
        return self.decode_alone(self.batch, prompts, max_new_tokens, on_token)


def timed_batch(rows, prompts: list, steps: int) -> dict:
    from memorag.runtime.decode_loop import DecodeBatch, Stops

    batch = DecodeBatch(rows, Stops())
    started = time.perf_counter()
    for key, prompt in enumerate(prompts):
        batch.join(key, prompt, steps)
    prefilled = time.perf_counter()
    count = 0
    while len(batch):
        batch.step()
        count += 1
    return {"prefill_s": round(prefilled - started, 3), "decode_s": round(time.perf_counter() - prefilled, 3),
            "steps": count}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from memorag.benchmarking.machine import load_average, machine_record
    from memorag.generation.batched import LanguageModelRows
    from memorag.memory.decoding import MemoryRows
    from memorag.retrieval.chunking import Document
    from memorag.runtime.decode_loop import DecodeBatch, Sampling, Stops
    from memorag.runtime.stop_tokens import stop_token_ids
    from memorag.serve.store import CorpusStore

    load_before = load_average()
    store = CorpusStore(tempfile.mkdtemp(prefix="memorag-batch-cost-"),
                        {"answer_max_new_tokens": args.answer_tokens, "clue_max_new_tokens": args.clue_tokens})
    store.load_models()
    memory_model, generator = store.models.memory_model, store.models.generator
    store.memorize("demo", [Document(id="demo", title="", text=TEXT.read_text(encoding="utf-8")[: args.chars])])

    def decode_alone(batch, prompts, max_new_tokens, on_token):
        if batch == "memory":
            return memory_model.generate_ids_batch([ids for ids, _ in prompts], prompts[0][1], max_new_tokens,
                                                   on_token=on_token)
        batch = DecodeBatch(LanguageModelRows(generator.model), Stops.of(stop_token_ids(generator.tokenizer, generator.model)),
                            Sampling(repetition_penalty=generator.repetition_penalty))  # one request, as the server's batcher decodes it
        batch.join(0, prompts[0], max_new_tokens)
        while True:
            ended = batch.step()
            if ended:
                return [ended[0].new_ids]

    catchers = {name: PromptCatcher(name, decode_alone) for name in ("memory", "generator")}
    store.decode_through({"memory_model": memory_model.decoding_through(catchers["memory"]),
                          "generator": generator.decoding_through(catchers["generator"])})
    stages = {}
    for mode in ("memorag", "rag"):
        answer = store.ask("demo", "Who raised Esther?", mode=mode)
        stages[mode] = answer.timings
    store.decode_through(None)
    clue_prompts = catchers["memory"].prompts
    answer_prompt = catchers["generator"].prompts[0]

    records = []
    for size in args.sizes:
        memory = timed_batch(MemoryRows(memory_model, "shared"), clue_prompts * size, args.clue_tokens)
        answers = timed_batch(LanguageModelRows(generator.model), [answer_prompt] * size, args.answer_tokens)
        records.append({"size": size, "clue_prompts": len(clue_prompts) * size, "memory": memory,
                        "generator": answers})
    one = records[0] if records[0]["size"] == 1 else None
    for row in records:
        for name in ("memory", "generator"):
            if one is not None:
                row[name]["decode_saving"] = round(row["size"] * one[name]["decode_s"] / row[name]["decode_s"], 2)
    print("stages of one ask (s):", json.dumps(stages))
    print(f"clue prompts: {[len(ids) for ids, _ in clue_prompts]} tokens; answer prompt: {len(answer_prompt)} tokens")
    print("| N | clue prefill s | clue decoding s | saving | answer prefill s | answer decoding s | saving |")
    print("|---|---|---|---|---|---|---|")
    for row in records:
        memory, answers = row["memory"], row["generator"]
        print(f"| {row['size']} | {memory['prefill_s']} | {memory['decode_s']} | {memory.get('decode_saving', '')} | "
              f"{answers['prefill_s']} | {answers['decode_s']} | {answers.get('decode_saving', '')} |")
    if args.json is not None:
        record = {"stages_s": stages, "clue_prompt_tokens": [len(ids) for ids, _ in clue_prompts],
                  "answer_prompt_tokens": len(answer_prompt), "records": records,
                  "settings": vars(args) | {"json": str(args.json)}, "machine": machine_record(load_before)}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
