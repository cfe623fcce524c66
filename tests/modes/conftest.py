"""Fakes and small hand-made corpora for the mode tests (the pipeline's fakes are reused)."""

from __future__ import annotations

from memorag.retrieval import Document
from tests.pipeline.conftest import FakeEchoGenerator


class FakeScriptedGenerator(FakeEchoGenerator):
    """A fake generator that answers its prompts with `replies` in turn (the last one repeats)."""

    def __init__(self, replies: list[str], context_window: int | None = None):
        super().__init__(replies[0], context_window)
        self.replies = list(replies)

    def generate(self, prompt, *, system=None, max_new_tokens=256, on_text=None) -> str:
        self.reply = self.replies[min(len(self.prompts), len(self.replies) - 1)]
        return super().generate(prompt, system=system, max_new_tokens=max_new_tokens, on_text=on_text)


def village_documents() -> list[Document]:
    """Five short documents on separate subjects; two pairs are linked (by title)."""
    return [
        Document("lighthouse", "The lighthouse lamp had been dark for a week. Mara Quill climbed the tower at "
                 "dusk. She replaced the burnt wick and the lamp shone again over the rocks.", "Lighthouse",
                 ["Harbour"]),
        Document("harbour", "Three fishing boats sailed from the harbour at dawn. The storm broke before noon "
                 "and the boats returned with torn sails.", "Harbour"),
        Document("bridge", "The village council debated the new stone bridge for a year. In spring the council "
                 "voted to pay for the bridge with the mill tax.", "Bridge"),
        Document("orchard", "The orchard on the hill grows red apples and pears. Pickers fill their baskets in "
                 "autumn.", "Orchard", ["mill"]),
        Document("mill", "The miller grinds wheat into flour at the water mill by the river.", "Mill"),
    ]


WICK_QUESTION = "Who replaced the wick of the lighthouse lamp?"
WICK_SENTENCE = "She replaced the burnt wick and the lamp shone again over the rocks."
