"""Every refusal's suggested fix works when pasted: each test triggers a refusal, takes the
command line or option the message suggests, runs it, and checks that it gets past the refusal.
Cheap refusals come before expensive work."""

from __future__ import annotations

import json

import pytest

from tests.reliability.conftest import SHORT, backticked, text_of


def test_too_long_context_each_suggested_spelling_works(cli, tiny_args, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(2600, seed=1))  # beyond the tiny model's reach at ratio 4
    refused = cli("memorize", book, "--out", tmp_path / "refused", *tiny_args)
    assert refused.returncode == 2 and "beyond the reach" in refused.stderr, refused
    fixes = backticked(refused.stderr)
    assert [fix[0] for fix in fixes] == ["--ratio", "--set", "--set"], fixes  # three spellings, all options
    for number, fix in enumerate(fixes):
        out = tmp_path / f"fixed{number}"
        result = cli("memorize", book, "--out", out, *tiny_args, *fix, "--json")
        assert result.returncode == 0, (fix, result)
        assert json.loads(result.stdout)["memory_tokens"] > 2600
    assert not (tmp_path / "refused").exists()


def test_too_long_when_adding_to_a_save_the_suggested_rewrite_works(cli, tiny_args, tmp_path):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text(text_of(1500, seed=2))
    second.write_text(text_of(1000, seed=3))
    out = tmp_path / "save"
    assert cli("memorize", first, "--out", out, *tiny_args).returncode == 0
    refused = cli("memorize", second, "--out", out, *tiny_args)
    assert refused.returncode == 2 and "cannot change" in refused.stderr and "--overwrite" in refused.stderr
    ratio = backticked(refused.stderr)[0]  # `--ratio N`
    redone = cli("memorize", first, second, "--out", out, "--overwrite", *tiny_args, *ratio, "--json")
    assert redone.returncode == 0, redone
    assert json.loads(redone.stdout)["num_documents"] == 2


@pytest.mark.slow
def test_a_query_too_long_for_the_generator_is_refused_first_and_both_fixes_work(cli, tiny_args, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(300, seed=4))
    out = tmp_path / "save"
    assert cli("memorize", book, "--out", out, *tiny_args).returncode == 0
    # the answer's length alone leaves no room in the tiny model's 512-token window
    refused = cli("ask", out, "where is the king", *tiny_args, "--max-new-tokens", "500")
    assert refused.returncode == 2 and "leaves no room for evidence" in refused.stderr, refused
    assert "clues:" not in refused.stderr  # refused before any clue was written
    fix = [option for option in backticked(refused.stderr) if option[0] == "--max-new-tokens"][0]
    assert cli("ask", out, "where is the king", *tiny_args, *fix).returncode == 0
    alternative = [option for option in backticked(refused.stderr) if option[0] == "--set"][0]
    assert cli("ask", out, "where is the king", *tiny_args, "--max-new-tokens", "500", "--mode", "rag",
               *alternative).returncode == 0
    # a long query: shorten it by the characters the message names
    query = "where is the king of the river city " * 80
    refused = cli("ask", out, query, *tiny_args, *SHORT, "--mode", "rag")
    assert refused.returncode == 2 and "shorten the query by at least" in refused.stderr, refused
    cut = int(refused.stderr.split("(about ")[1].split(" characters")[0])
    assert cli("ask", out, query[: len(query) - cut], *tiny_args, *SHORT, "--mode", "rag").returncode == 0


def test_a_huge_query_is_refused_before_clue_writing(monkeypatch):
    from tests.pipeline.conftest import FakeEchoGenerator, corpus_documents, make_rag

    rag = make_rag(generator=FakeEchoGenerator(context_window=200))
    rag.memorize(corpus_documents())

    def no_clues(*args, **kwargs):
        raise AssertionError("clues were written for a query that cannot fit")

    from memorag.modes.evidence import EvidenceStep

    monkeypatch.setattr(rag.mode("memorag"), "write_clues", no_clues)
    monkeypatch.setattr(EvidenceStep, "retrieve", no_clues)
    from memorag.pipeline import QueryTooLongError

    with pytest.raises(QueryTooLongError, match="shorten the query"):
        rag.ask("word " * 20_000)


@pytest.mark.parametrize("answer_tokens", [190, 199, 260])
def test_the_suggested_answer_length_is_the_longest_that_fits(answer_tokens):
    from memorag.pipeline import QueryTooLongError
    from tests.pipeline.conftest import FakeEchoGenerator, corpus_documents, make_rag

    def ask(answer_max_new_tokens: int):
        rag = make_rag(generator=FakeEchoGenerator(context_window=200), answer_max_new_tokens=answer_max_new_tokens)
        rag.memorize(corpus_documents())
        return rag.ask("where is the king", mode="rag")

    with pytest.raises(QueryTooLongError) as refused:
        ask(answer_tokens)
    fitting = int(str(refused.value).split("answer in at most ")[1].split(" tokens")[0])
    assert ask(fitting).answer == "the fake answer"
    with pytest.raises(QueryTooLongError):
        ask(fitting + 1)


def test_wide_encodings_and_misencoded_files_fixes_work(cli, tiny_args, tmp_path):
    # UTF-16 with its byte-order mark, and latin-1, are read as they are (the encoding detected)
    wide = tmp_path / "wide.txt"
    wide.write_bytes(text_of(200, seed=5).encode("utf-16"))
    assert cli("memorize", wide, "--out", tmp_path / "a", *tiny_args).returncode == 0
    latin = tmp_path / "latin.txt"
    latin.write_bytes(("Ester \u00e9tait reine de Perse. " + text_of(100, seed=6)).encode("latin-1"))
    assert cli("memorize", latin, "--out", tmp_path / "b", *tiny_args).returncode == 0
    # an encoding named wrongly is refused with the fix, and the fix works
    refused = cli("memorize", latin, "--out", tmp_path / "c", *tiny_args, "--encoding", "utf-8")
    assert refused.returncode == 2 and "is not valid utf-8 text (byte 0xe9" in refused.stderr, refused
    assert "leave it out to have it detected" in refused.stderr and not (tmp_path / "c").exists()
    assert cli("memorize", latin, "--out", tmp_path / "c", *tiny_args, "--encoding", "latin1").returncode == 0


def test_other_settings_at_ask_time_the_suggested_fixes_work(cli, tiny_args, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(300, seed=7))
    out = tmp_path / "save"
    assert cli("memorize", book, "--out", out, *tiny_args).returncode == 0
    refused = cli("ask", out, "where is the king", *tiny_args, *SHORT, "--chunk-tokens", "64")
    assert refused.returncode == 1 and "chunk_tokens=160, not 64" in refused.stderr, refused
    # "ask it with the same setting":
    assert cli("ask", out, "where is the king", *tiny_args, *SHORT, "--set", "chunk_tokens=160").returncode == 0
    # "or memorize the context again with chunk_tokens=64":
    again = tmp_path / "again"
    assert cli("memorize", book, "--out", again, *tiny_args, "--set", "chunk_tokens=64").returncode == 0
    assert cli("ask", again, "where is the king", *tiny_args, *SHORT, "--chunk-tokens", "64").returncode == 0


def test_a_damaged_save_the_suggested_rewrite_works(cli, tiny_args, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(300, seed=8))
    out = tmp_path / "save"
    assert cli("memorize", book, "--out", out, *tiny_args).returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["memory"]["num_tokens"] += 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    refused = cli("ask", out, "where is the king", *tiny_args, *SHORT)
    assert refused.returncode == 1 and "'memory'" in refused.stderr, refused
    command = backticked(refused.stderr)[-1]
    assert command[:2] == ["memorag", "memorize"] and "FILE..." in command
    files = [str(book) if part == "FILE..." else part for part in command[2:]]
    assert cli("memorize", *files, *tiny_args).returncode == 0
    assert cli("ask", out, "where is the king", *tiny_args, *SHORT).returncode == 0
