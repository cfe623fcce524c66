"""The gist budget of the first five books of the KJV on the embedded model (no model is run):

    bible -f "Gen1:1-Deu34:12" > kjv-genesis-deuteronomy.txt
    python benchmarks/lite_budget.py kjv-genesis-deuteronomy.txt

Prints the windows (count, tokens in all, longest, shortest) and `plan_gist_budget`'s result for a
generator that counts tokens as `LocalGenerator.count_tokens` does on the embedded model (its chat
template; a fake that only counts, named as one).
"""

import sys

from transformers import AutoTokenizer

from memorag.embedded import resolve_lm
from memorag.generation.base import Generator
from memorag.lite import GistMemory, GistSettings, gist_windows, plan_gist_budget
from memorag.retrieval.chunking import Document

tokenizer = AutoTokenizer.from_pretrained(resolve_lm(None))


class FakeCountingGenerator(Generator):
    name, context_window = "embedded:smollm2-135m-instruct", 8192

    def generate(self, *args, **kwargs):
        raise RuntimeError("a fake that only counts tokens")

    def count_tokens(self, prompt, system=None):
        messages = [{"role": "user", "content": prompt}]
        return len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"])


text = open(sys.argv[1], encoding="utf-8").read()
windows = gist_windows([Document("kjv", text)], tokenizer, GistSettings().window_tokens)
print(len(windows), sum(w.num_tokens for w in windows), max(w.num_tokens for w in windows),
      min(w.num_tokens for w in windows))
print(plan_gist_budget(FakeCountingGenerator(), windows, GistMemory(), GistSettings(), reply_tokens=128))
