"""The generator's answer prompt: a short sentence for people, or a benchmark's own form.

    AnswerForm()                                          # "sentence": prompts.GENERATOR_ANSWER, for the CLI
    AnswerForm("longbench:hotpotqa")                      # LongBench's template for its hotpotqa set
    AnswerForm("ruler:niah", {"type_needle_v": "numbers", "query": "apple", "single": "true"})

A benchmark scores the answer alone (LongBench's token F1, RULER's string match), so its
prompt asks for the answer only; a sentence around a correct answer scores 0.1 to 0.3
in F1. Forms:

- ``sentence``: "answer the question in one short sentence", with the pipeline's system
  prompt (`prompts.GENERATOR_SYSTEM`). The default of `MemoRAG.ask` and the CLI.
- ``longbench:DATASET``: `prompts.LONGBENCH_PROMPTS[DATASET]`, ``{context}`` being the
  passages given to the generator and ``{input}`` the question. No system prompt (LongBench
  sends none).
- ``ruler:TASK``: `prompts.RULER_PROMPTS[TASK]`, the template then the answer prefix, as
  RULER's prepare script joins them. ``niah`` needs the fields ``type_needle_v`` (numbers,
  words, uuids) and ``query`` (the key or keys), and ``single`` = "true" when one value is
  asked for: RULER then rewrites the template into the singular (its own string
  replacements, reproduced in `_ruler_singular`). ``variable_tracking`` needs ``query`` (the
  value) and ``num_v``; ``qa`` takes the question as ``query`` unless given.
  ``common_words_extraction`` and ``freq_words_extraction`` need none. No system prompt.

Summaries (task ``summarize``) keep `prompts.GENERATOR_SUMMARY` in every form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memorag.prompting import prompts

SENTENCE = "sentence"
_REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "niah": ("type_needle_v", "query"),
    "variable_tracking": ("query", "num_v"),
    "common_words_extraction": (),
    "freq_words_extraction": (),
    "qa": (),
}


class AnswerFormError(ValueError):
    """An answer form that does not exist, or lacks the fields its template needs."""


def form_names() -> list[str]:
    """Every form's name."""
    return ([SENTENCE] + [f"longbench:{name}" for name in prompts.LONGBENCH_PROMPTS]
            + [f"ruler:{name}" for name in prompts.RULER_PROMPTS])


@dataclass(frozen=True)
class AnswerForm:
    """A named answer prompt and the example's own fields it needs (see the module docstring)."""

    name: str = SENTENCE
    fields: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in form_names():
            raise AnswerFormError(f"unknown answer prompt {self.name!r}; choose sentence, longbench:DATASET "
                                  f"({', '.join(prompts.LONGBENCH_PROMPTS)}) or ruler:TASK "
                                  f"({', '.join(prompts.RULER_PROMPTS)})")
        family, _, task = self.name.partition(":")
        if family == "ruler":
            missing = [name for name in _REQUIRED_FIELDS[task] if name not in self.fields]
            if missing:
                raise AnswerFormError(f"answer prompt {self.name!r} needs the fields {', '.join(missing)} "
                                      "(the example's meta['answer_prompt']['fields'])")

    @property
    def benchmark(self) -> bool:
        return self.name != SENTENCE

    def render(self, passages: str, question: str, language: str = "en") -> str:
        """The prompt for `question` over `passages` (already rendered)."""
        family, _, task = self.name.partition(":")
        if family == SENTENCE:
            return prompts.fill(prompts.GENERATOR_ANSWER, language, passages=passages, question=question)
        if family == "longbench":
            return prompts.LONGBENCH_PROMPTS[task].format(context=passages, input=question)
        template, answer_prefix = prompts.RULER_PROMPTS[task]
        template += answer_prefix
        values = {"query": question, **self.fields}
        if task == "niah" and self.fields.get("single") == "true":
            template, values["type_needle_v"] = _ruler_singular(template, values["type_needle_v"])
        values.pop("single", None)
        return template.format(context=passages, **values)

    def system(self, language: str = "en") -> str | None:
        """The system prompt that goes with it (benchmarks send none)."""
        return None if self.benchmark else prompts.fill(prompts.GENERATOR_SYSTEM, language)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fields": dict(self.fields)}


def _ruler_singular(template: str, type_needle_v: str) -> tuple[str, str]:
    """RULER's niah rewrite when one value is asked for (scripts/data/synthetic/niah.py): these
    replacements, in this order, and the value type without its final "s"."""
    for old, new in (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer")):
        template = template.replace(old, new)
    return template, type_needle_v[:-1]


def as_answer_form(spec: AnswerForm | Mapping[str, Any] | str | None) -> AnswerForm:
    """An `AnswerForm` from a form, a name, or ``{"name": ..., "fields": {...}}`` (None: sentence)."""
    if spec is None:
        return AnswerForm()
    if isinstance(spec, AnswerForm):
        return spec
    if isinstance(spec, str):
        return AnswerForm(spec)
    unknown = set(spec) - {"name", "fields"}
    if unknown or "name" not in spec:
        raise AnswerFormError(f"an answer prompt is {{'name': ..., 'fields': {{...}}}}; got keys {sorted(spec)}")
    return AnswerForm(str(spec["name"]), {str(k): str(v) for k, v in dict(spec.get("fields") or {}).items()})
