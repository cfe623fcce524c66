"""What the embedded reader costs against the embedded LM as it comes: load time, decoding speed, size.

    python benchmarks/reader_price.py --json results/benchmarks/NAME/reader_price.json

The memory model (the embedded one, its shipped memory weights) is loaded once; then the two
generators over it are loaded, each `--rounds` times: `embedded-base` (the memory model's base
itself) and the default `embedded` (a second model holding the base's tensors but the adapted
projections, merged copies: memorag/generation/reader_adapter.py). Each writes `--tokens` new tokens
after the same answer prompt of about `--prompt-tokens` tokens (stop tokens ignored, greedy),
alternating which goes first each round; prefill and decoding are timed apart. The record holds
the medians, the adapter's size on disk and the memory the copies take.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "examples" / "kjv_ruth_esther_jonah.txt"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="loads and decodings of each generator (default 5)")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens decoded (default 32)")
    parser.add_argument("--prompt-tokens", type=int, default=1000, help="about this many prompt tokens (default 1000)")
    parser.add_argument("--json", type=Path, help="write the record here")
    args = parser.parse_args(argv)
    if min(args.rounds, args.tokens, args.prompt_tokens) < 1:
        parser.error("--rounds, --tokens and --prompt-tokens must be at least 1")
    return args


def _decode(model, ids: torch.Tensor, tokens: int) -> tuple[float, float]:
    """Seconds of the prefill of `ids` [1, T] and of `tokens` greedy steps after it."""
    from transformers import DynamicCache

    with torch.inference_mode():
        started = time.perf_counter()
        cache = DynamicCache()
        logits = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[:, -1]
        prefilled = time.perf_counter()
        for _ in range(tokens):
            token = logits.argmax(-1, keepdim=True)
            logits = model(input_ids=token, past_key_values=cache, use_cache=True).logits[:, -1]
        return prefilled - started, time.perf_counter() - prefilled


def measure(args: argparse.Namespace) -> dict:
    from memorag.generation import load_generator
    from memorag.memory import MemoryModel
    from memorag.runtime.embedded import SHIPPED_READER_DIR

    memory_model = MemoryModel.from_pretrained("embedded", memory_weights="embedded")
    tokenizer = memory_model.tokenizer
    words = TEXT.read_text(encoding="utf-8").split()
    passage = " ".join(words[: int(args.prompt_tokens * 0.7)])
    prompt = f"Passages:\n{passage}\n\nQuestion: Which city was Jonah sent to?\nAnswer:"
    ids = tokenizer(prompt, return_tensors="pt").input_ids[:, : args.prompt_tokens]
    runs: dict[str, dict[str, list[float]]] = {name: {"load_s": [], "prefill_s": [], "decode_s": []}
                                               for name in ("embedded-base", "embedded")}
    for round_index in range(args.rounds):
        order = list(runs) if round_index % 2 == 0 else list(reversed(runs))
        for name in order:
            started = time.perf_counter()
            generator = load_generator(name, memory_model=memory_model)
            runs[name]["load_s"].append(time.perf_counter() - started)
            prefill, decode = _decode(generator.model, ids, args.tokens)
            runs[name]["prefill_s"].append(prefill)
            runs[name]["decode_s"].append(decode)
    reader = load_generator("embedded", memory_model=memory_model).model
    base_ids = {id(parameter) for parameter in memory_model.base_model.parameters()}
    copies = [p for p in reader.parameters() if id(p) not in base_ids]
    medians = {name: {key: statistics.median(values) for key, values in run.items()} for name, run in runs.items()}
    for median in medians.values():
        median["decode_ms_per_token"] = 1000 * median["decode_s"] / args.tokens
    return {
        "prompt_tokens": int(ids.shape[1]), "new_tokens": args.tokens, "rounds": args.rounds,
        "threads": torch.get_num_threads(), "dtype": str(memory_model.base_dtype), "medians": medians, "runs": runs,
        "decode_ratio_reader_over_base": medians["embedded"]["decode_s"] / medians["embedded-base"]["decode_s"],
        "adapter_bytes_on_disk": sum(p.stat().st_size for p in SHIPPED_READER_DIR.iterdir() if p.is_file()),
        "copied_parameters": len(copies), "copied_bytes": sum(p.numel() * p.element_size() for p in copies),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    record = measure(args)
    for name, median in record["medians"].items():
        print(f"{name:14s} load {median['load_s']:.3f} s  prefill {median['prefill_s']:.2f} s  "
              f"decode {median['decode_ms_per_token']:.1f} ms/token")
    print(f"reader/base decode time {record['decode_ratio_reader_over_base']:.3f}; adapter "
          f"{record['adapter_bytes_on_disk'] / 1e6:.2f} MB on disk; {record['copied_parameters']} projections "
          f"copied, {record['copied_bytes'] / 1e6:.1f} MB")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
