"""The `memorag-lite` mode: the memory is the gists of the text, held by any instruct model or endpoint.

The official MemoRAG's Lite pipeline (`MemoRAGLite` in the qhjqhj00/MemoRAG repository), written
anew: the text is cut into windows of about 4,096 tokens, the generator writes a gist of
each, the gists joined in a context prompt are the memory, and the clues (text spans, surrogate
questions, a draft answer) are the generator's replies to the reference's prompts read after that
memory in the same user turn (`memorag.prompting.prompts`, LITE_*). The pipeline writes the gists
(`MemoRAG.ensure_gists`, `memorag.lite`) and saves them with the corpus; this mode reads them.
Everything after the clues is the memorag mode's: the same clue parsing, evidence rule, answer prompt,
tasks and settings. It needs no memory model training: any generator the pipeline can use writes the
gists and reads them, up to the texts whose gists fit its positions. A reader (the embedded generator with
its adapter) only answers: its base, `Generator.memory_writer`, writes the gists and the clues.
"""

from __future__ import annotations

from collections.abc import Callable

from memorag.modes.base import register_mode
from memorag.modes.context import ModeContext
from memorag.modes.memorag import MemoRAGMode, MemoRAGSettings, check_decoding, clues_from_replies
from memorag.modes.results import Answer, AskHooks, timed
from memorag.prompting import prompts


@register_mode
class MemoRAGLiteMode(MemoRAGMode):
    """The memorag mode with the gists of the text, read by the generator, as the memory."""

    name = "memorag-lite"
    description = "memorag with the generator's gists of the text as the memory (no memory model)"
    needs_memory = False
    needs_gists = True
    reads = "gist memory"

    def prepare(self, context: ModeContext) -> None:
        _ = context.gists  # written now where `memorize` did not write them

    def answer(self, context: ModeContext, query: str, task: str, hooks: AskHooks) -> Answer:
        if task != "qa":
            return super().answer(context, query, task, hooks)
        timings: dict[str, float] = {}
        with timed(timings, "generate"):
            text = self.answer_from_memory(context, query, context.language_of(query), hooks.on_text)
        return Answer(query, task, self.name, text, timings=timings,
                      generator=f"{context.generator.name} ({self.reads})")

    def answer_from_memory(self, context: ModeContext, query: str, language: str,
                           on_text: Callable[[str], None] | None = None) -> str:
        prompt = prompts.fill(prompts.LITE_ANSWER, language, question=query)
        text = context.gists.replies(context.generator, [prompt], context.settings.answer_max_new_tokens, language)[0]
        if on_text is not None:
            on_text(text)
        return text

    def write_clues(self, context: ModeContext, query: str, task: str, language: str,
                    show_progress: bool = False, decoding: str = "batch") -> tuple[list[str], dict[str, str]]:
        """The reference's clue prompts answered over the gist memory by the generator's memory writer (a
        reader's base: the clues are the memory's, as the memorag mode's are the memory model's), one after
        another (a local generator reads the memory once for all; `decoding` is checked and `show_progress`
        accepted, as `memorag` takes them; neither changes it)."""
        check_decoding(decoding)
        requests = lite_clue_requests(context.settings, query, task, language)
        replies = context.gists.replies(context.generator.memory_writer, [prompt for prompt, _ in requests.values()],
                                        context.settings.clue_max_new_tokens, language)
        raw = dict(zip(requests, replies, strict=True))
        return clues_from_replies(requests, raw, query, context.settings), raw


def lite_clue_requests(settings: MemoRAGSettings, query: str, task: str, language: str) -> dict[str, tuple[str, bool]]:
    """The reference's prompt of each clue kind (its key-point list for `summarize`), and whether its reply is
    split into lines: the same kinds as `memorag.modes.memorag.clue_requests`, the reference's words."""
    if task == "summarize":
        return {"key_points": (prompts.fill(prompts.LITE_KEY_POINTS, language), True)}
    templates = {"spans": prompts.LITE_SPANS, "questions": prompts.LITE_QUESTIONS, "draft": prompts.LITE_ANSWER}
    return {kind: (prompts.fill(templates[kind], language, question=query), kind != "draft")
            for kind in settings.clue_kinds}
