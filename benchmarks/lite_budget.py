"""The gist budget of the first five books of the KJV on the embedded model (no model is run):

    bible -f "Gen1:1-Deu34:12" > kjv-genesis-deuteronomy.txt
    python benchmarks/lite_budget.py kjv-genesis-deuteronomy.txt

Prints the windows (count, tokens in all, longest, shortest) and `plan_gist_budget`'s result for a
generator that counts tokens as `LocalGenerator.count_tokens` does on the embedded model (its chat
template; a fake that only counts, named as one).
"""

import argparse
import sys
from typing import Any

from transformers import AutoTokenizer

from memorag.generation.base import Generator
from memorag.lite import GistMemory, GistSettings, gist_windows, plan_gist_budget
from memorag.retrieval.chunking import Document
from memorag.runtime.embedded import resolve_lm


class FakeCountingGenerator(Generator):
    """A fake generator that only counts tokens (through the embedded model's chat template)."""

    name, context_window = "embedded:smollm2-135m-instruct", 8192

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def generate(self, *args, **kwargs):
        raise RuntimeError("a fake that only counts tokens")

    def count_tokens(self, prompt, system=None):
        messages = [{"role": "user", "content": prompt}]
        return len(self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"])



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The gist budget of a text file on the embedded model.")
    parser.add_argument("text", help="the text file (e.g. the first five books of the KJV)")
    args = parser.parse_args(argv)
    tokenizer = AutoTokenizer.from_pretrained(resolve_lm(None))
    with open(args.text, encoding="utf-8") as file:
        text = file.read()
    windows = gist_windows([Document("kjv", text)], tokenizer, GistSettings().window_tokens)
    print(len(windows), sum(w.num_tokens for w in windows), max(w.num_tokens for w in windows),
          min(w.num_tokens for w in windows))
    print(plan_gist_budget(FakeCountingGenerator(tokenizer), windows, GistMemory(), GistSettings(), reply_tokens=128))
    return 0


if __name__ == "__main__":
    sys.exit(main())
