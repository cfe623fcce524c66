"""Settings are range-checked when the config is made, naming the key (and the flag that set it);
the Python API checks its arguments' types as clearly as the command line; each mode's answer is
headed for what it is."""

from __future__ import annotations

import math
import re

import pytest

from memorag.config import ConfigError, config_from_dict
from memorag.generation.base import GeneratorError
from memorag.pipeline import InputError, PipelineConfig
from tests.pipeline.conftest import make_rag
from tests.reliability.conftest import SHORT, text_of

BAD_SETTINGS = [
    ("timeout", -1), ("timeout", 0), ("timeout", math.inf), ("max_retries", -3), ("repetition_penalty", 0),
    ("repetition_penalty", -1.5), ("query_weight", -5), ("query_weight", math.nan), ("hyde.query_weight", 0),
    ("rqrag.query_weight", -1), ("generator_window", 0), ("evidence_tokens", 0), ("dos.evidence_tokens", -1),
    ("hits_per_query", 0), ("max_clues", 0), ("answer_max_new_tokens", 0), ("cic.examples", -1),
    ("chunk_tokens", 4), ("overlap_tokens", -1), ("longrag.units", 0), ("mixpr.top_k", 0),
]


@pytest.mark.parametrize(("key", "value"), BAD_SETTINGS)
def test_every_setting_is_range_checked_when_the_config_is_made(key, value):
    section, _, name = key.rpartition(".")  # a mode's setting is a key of its section
    given = {section: {name: value}} if section else {key: value}
    with pytest.raises(ConfigError, match="^" + re.escape(f"{key}=")):
        config_from_dict(PipelineConfig, given)
    with pytest.raises(ConfigError, match=re.escape(key)):
        make_rag(**given)  # through the Python API's keywords too


def test_memory_settings_are_range_checked_naming_the_key():
    from memorag.config import load_config

    for item, fragment in (("memory.window=0", "window=0"), ("memory.ratios=[3]", "ratio 3 does not divide"),
                           ("memory.ratio_mix=sometimes", "ratio_mix")):
        with pytest.raises(ConfigError, match=fragment):
            load_config(PipelineConfig, None, [item])


def test_generator_settings_are_range_checked():
    from memorag.generation.openai import OpenAIGenerator

    for kwargs, fragment in (({"timeout": -1}, "timeout"), ({"max_retries": -2}, "max_retries"),
                             ({"temperature": -0.5}, "temperature")):
        with pytest.raises(GeneratorError, match=fragment):
            OpenAIGenerator("http://127.0.0.1:9/v1", "m", **kwargs)
    from memorag.generation.local import LocalGenerator

    for kwargs, fragment in (({"repetition_penalty": 0}, "repetition_penalty"), ({"temperature": 0}, "temperature"),
                             ({"top_p": 1.5}, "top_p")):
        with pytest.raises(GeneratorError, match=fragment):
            LocalGenerator(object(), object(), name="fake", **kwargs)


def test_the_command_line_names_the_flag_and_refuses_before_any_work(cli, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(100, seed=20))
    for args, fragment in ((["--retries", "-3"], "--retries: max_retries=-3 must be 0 or more"),
                           (["--timeout", "-1"], "--timeout: timeout=-1.0 must be a finite number above 0"),
                           (["--set", "timeout=-1"], "timeout=-1.0 must be"),
                           (["--set", "repetition_penalty=0"], "repetition_penalty=0.0 must be"),
                           (["--set", "query_weight=-5"], "query_weight=-5.0 must be"),
                           (["--max-new-tokens", "0"], "--max-new-tokens: answer_max_new_tokens=0")):
        result = cli("ask", "--context", book, "a question", *args)
        assert result.returncode == 2 and fragment in result.stderr, (args, result)
        assert "memorizing" not in result.stderr and "gave up" not in result.stderr
    refused = cli("memorize", book, "--out", tmp_path / "out", "--wait", "-1")
    assert refused.returncode == 2 and "--wait -1.0" in refused.stderr


@pytest.mark.parametrize(("argument", "fragment"), [
    (None, "memorize() takes a text, a Document or a list of them, not None"),
    (b"some text", "memorize() got bytes, not text; decode it first"),
    ([b"some text"], "item 0 is bytes, not text; decode it first"),
    (42, "not an int"),
    ({"id": "x", "text": "y"}, "not a dict"),
    (["fine text", 3.5], "item 1 is a float; give texts (str), Document objects or paths"),
    ([], "the list of documents is empty"),
    (["   "], "is empty"),
])
def test_memorize_checks_its_argument_types(argument, fragment):
    rag = make_rag()
    with pytest.raises(InputError) as refused:
        rag.memorize(argument)
    assert fragment in str(refused.value)
    assert rag.documents == []


def test_a_documents_text_must_be_text():
    from memorag.retrieval import Document

    with pytest.raises(InputError, match="has text that is bytes, not text; decode it first"):
        make_rag().memorize(Document(id="d", text=b"bytes"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("query", "fragment"), [
    (None, "the query is None, not text"), (b"who?", "decode it first"), (7, "the query is an int"), ("  ", "empty"),
])
def test_ask_checks_its_query_type(query, fragment):
    from tests.pipeline.conftest import corpus_documents

    rag = make_rag()
    rag.memorize(corpus_documents())
    with pytest.raises(InputError, match=fragment):
        rag.ask(query)


def test_each_modes_answer_is_headed_for_what_it_is(cli, tiny_args, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(300, seed=21))
    out = tmp_path / "save"
    assert cli("memorize", book, "--out", out, *tiny_args).returncode == 0
    for mode in ("rag", "dos", "hyde", "rqrag", "mixpr", "memorag"):
        result = cli("ask", out, "where is the king", *tiny_args, *SHORT, "--mode", mode,
                     "--set", "hyde.max_new_tokens=4", "--set", "rqrag.max_new_tokens=4", "--set", "mixpr.router=rules")
        assert result.returncode == 0, (mode, result)
        assert f"answer ({mode}):" in result.stderr, (mode, result.stderr)
        assert "from memory alone" not in result.stderr
    alone = cli("ask", out, "where is the king", *tiny_args, *SHORT, "--task", "qa")
    assert alone.returncode == 0 and "answer (memorag, from memory alone):" in alone.stderr, alone
    assert "evidence:" not in alone.stderr
