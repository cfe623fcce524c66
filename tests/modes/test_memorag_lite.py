"""The `memorag-lite` mode: gists of windows of the text, written by the generator, are the memory; the
reference's clue prompts are answered over it; everything after the clues is the memorag mode's."""

from __future__ import annotations

import pytest

from memorag.generation import Generator
from memorag.lite import GistMemoryTooLongError, GistSettings, gist_windows
from memorag.pipeline import MemoRAG
from memorag.prompting import prompts
from memorag.retrieval import Document
from tests.memory.test_persistence import tiny_tokenizer
from tests.pipeline.conftest import corpus_documents, make_rag, topic


class FakeGistGenerator(Generator):
    """A fake generator: a gist prompt gets "gist N" (N counting the gists written), any other prompt
    `reply`; it records every prompt and may break off after `fail_after` gists (a stopped memorize)."""

    name = "fake-gists"

    def __init__(self, context_window: int = 4096, reply: str = "the fake answer", fail_after: int | None = None):
        self.context_window, self.reply, self.fail_after = context_window, reply, fail_after
        self.prompts: list[str] = []
        self.gists_written = 0

    def generate(self, prompt, *, system=None, max_new_tokens=256, on_text=None) -> str:
        self.prompts.append(prompt)
        if prompt.startswith(prompts.LITE_GIST["en"].split("{")[0]):
            if self.fail_after is not None and self.gists_written >= self.fail_after:
                raise RuntimeError("stopped half-way")
            self.gists_written += 1
            return f"gist {self.gists_written}"
        return self.reply

    def count_tokens(self, prompt, system=None) -> int:
        return len(prompt.split()) + (len(system.split()) if system else 0)


def lite_rag(tmp_path, generator: Generator | None = None, **lite) -> MemoRAG:
    settings = {"window_tokens": 20, "checkpoint_dir": str(tmp_path / "gists"), **lite}
    return make_rag(generator=generator or FakeGistGenerator(), mode="memorag-lite", lite=settings)


def test_windows_cover_each_document_in_order_within_the_window():
    documents = [Document("a", topic(0, 50)), Document("b", topic(1, 7))]
    windows = gist_windows(documents, tiny_tokenizer(), 20)
    assert [(w.doc_id, w.num_tokens) for w in windows] == [("a", 20), ("a", 20), ("a", 10), ("b", 7)]
    for document in documents:
        mine = [w for w in windows if w.doc_id == document.id]
        assert mine[0].start_char == 0 and mine[-1].end_char == len(document.text)
        assert all(left.end_char == right.start_char for left, right in zip(mine, mine[1:], strict=False))


def test_memorize_writes_a_gist_per_window_and_the_clues_read_them(tmp_path):
    generator = FakeGistGenerator()
    rag = lite_rag(tmp_path, generator)
    report = rag.memorize(corpus_documents(), with_memory=False)
    assert report.num_gists == 9 and rag.memory is None  # 3 documents of 60 words in windows of 20; no beacon memory
    gists = rag.memorized.gists
    assert [gist.text for gist in gists.gists] == [f"gist {n}" for n in range(1, 10)]
    assert gists.prefix() == prompts.fill(prompts.LITE_CONTEXT, "en", context="\n".join(f"gist {n}" for n in range(1, 10)))
    written = len(generator.prompts)
    answer = rag.ask(topic(1, 6))
    asked = generator.prompts[written:]
    for kind, template in (("spans", prompts.LITE_SPANS), ("questions", prompts.LITE_QUESTIONS),
                           ("draft", prompts.LITE_ANSWER)):
        assert gists.prefix() + prompts.fill(template, "en", question=topic(1, 6)) in asked, kind
    assert generator.gists_written == 9  # asking wrote none
    assert answer.mode == "memorag-lite" and answer.evidence and set(answer.raw_clues) == {"spans", "questions", "draft"}


def test_qa_answers_from_the_gists_alone(tmp_path):
    generator = FakeGistGenerator(reply="Ruth")
    rag = lite_rag(tmp_path, generator)
    rag.memorize(corpus_documents(), with_memory=False)
    answer = rag.ask("who?", task="qa")
    assert answer.answer == "Ruth" and not answer.evidence and answer.generator == "fake-gists (gist memory)"
    assert generator.prompts[-1] == rag.memorized.gists.prefix() + prompts.fill(prompts.LITE_ANSWER, "en",
                                                                               question="who?")


def test_an_added_document_adds_only_its_gists(tmp_path):
    generator = FakeGistGenerator()
    rag = lite_rag(tmp_path, generator)
    first, second, third = corpus_documents()
    rag.memorize([first, second], with_memory=False)
    assert generator.gists_written == 6
    rag.memorize([first, third], with_memory=False)  # first is skipped, third's three windows are new
    assert generator.gists_written == 9
    assert [gist.window.doc_id for gist in rag.memorized.gists.gists] == ["alpha"] * 3 + ["beta"] * 3 + ["gamma"] * 3


def test_a_stopped_memorize_continues_where_it_stopped(tmp_path):
    broken = FakeGistGenerator(fail_after=4)
    with pytest.raises(RuntimeError, match="stopped"):
        lite_rag(tmp_path, broken, batch_size=2).memorize(corpus_documents(), with_memory=False)
    again = FakeGistGenerator()
    rag = lite_rag(tmp_path, again, batch_size=2)
    rag.memorize(corpus_documents(), with_memory=False)
    assert again.gists_written == 5  # the 4 checkpointed gists are not written again
    assert [gist.text for gist in rag.memorized.gists.gists] == [f"gist {n}" for n in (1, 2, 3, 4, 1, 2, 3, 4, 5)]


def test_gists_are_sized_to_fit_and_a_memory_that_cannot_fit_is_refused_before_any_is_written(tmp_path):
    roomy = FakeGistGenerator(context_window=4096)
    lite_rag(tmp_path, roomy).memorize(corpus_documents(), with_memory=False)
    checkpoints = list((tmp_path / "gists").glob("*.jsonl"))
    assert len(checkpoints) == 1  # written at the reference's 512 new tokens a gist: there was room
    tight = FakeGistGenerator(context_window=600)
    rag = lite_rag(tmp_path / "tight", tight, min_gist_tokens=40)
    with pytest.raises(GistMemoryTooLongError, match=r"9 gists .* tokens a gist, under the 40 asked.*generator_window"):
        rag.memorize(corpus_documents(), with_memory=False)
    assert tight.prompts == [] and rag.documents == []
    small = lite_rag(tmp_path / "small", FakeGistGenerator(context_window=600), min_gist_tokens=8)
    small.memorize(corpus_documents(), with_memory=False)
    assert 8 <= small.memorized.gists.gists[0].max_new_tokens < 40


def test_a_generator_of_unknown_positions_is_asked_for_them(tmp_path):
    rag = lite_rag(tmp_path, FakeGistGenerator(context_window=None))
    with pytest.raises(GistMemoryTooLongError, match="generator_window"):
        rag.memorize(corpus_documents(), with_memory=False)


def test_gists_are_saved_with_the_corpus_and_not_written_again(tmp_path):
    rag = lite_rag(tmp_path)
    rag.memorize(corpus_documents(), with_memory=False)
    rag.save(tmp_path / "save")
    assert (tmp_path / "save" / "gists.jsonl").is_file()
    generator = FakeGistGenerator()
    loaded = MemoRAG.load(tmp_path / "save", memory_model=rag.memory_model, embedder=rag.embedder,
                          embedder_name="fake-hash", generator=generator)
    loaded.ask(topic(2, 5), mode="memorag-lite")
    assert generator.gists_written == 0
    assert [g.text for g in loaded.memorized.gists.gists] == [g.text for g in rag.memorized.gists.gists]


def test_another_mode_s_corpus_gets_its_gists_on_first_use(tmp_path):
    generator = FakeGistGenerator()
    rag = make_rag(generator=generator, lite={"window_tokens": 30, "checkpoint_dir": str(tmp_path)})
    rag.memorize(corpus_documents(), with_memory=False)  # the memorag mode: no gists
    assert rag.memorized.gists is None
    rag.ask(topic(0, 5), mode="memorag-lite")
    assert generator.gists_written == 6 and len(rag.memorized.gists) == 6


def test_settings_are_checked():
    from memorag.config import ConfigError

    with pytest.raises(ConfigError, match="lite.window_tokens"):
        GistSettings(window_tokens=0)
    with pytest.raises(ConfigError, match="min_gist_tokens"):
        GistSettings(min_gist_tokens=600)


@pytest.mark.slow  # 12 s on 2 shared cores: three clues and two replies of a tiny model over the gists
def test_a_local_generator_reads_the_memory_once_for_every_clue(tmp_path):
    from memorag.generation import LocalGenerator
    from tests.pipeline.conftest import tiny_model

    model = tiny_model()
    generator = LocalGenerator.from_memory_model(model)
    rag = make_rag(model, generator=generator, mode="memorag-lite",
                   lite={"window_tokens": 20, "max_new_tokens": 4, "min_gist_tokens": 2,
                         "checkpoint_dir": str(tmp_path)})
    rag.memorize(corpus_documents(), with_memory=False)
    builds = generator.prefix_cache.builds
    answer = rag.ask(topic(1, 6))
    assert set(answer.raw_clues) == {"spans", "questions", "draft"}
    assert generator.prefix_cache.builds == builds + 1 and generator.prefix_cache.reuses >= 3
    prefix = rag.memorized.gists.prefix()
    for kind, template in (("spans", prompts.LITE_SPANS), ("draft", prompts.LITE_ANSWER)):
        alone = generator.generate(prefix + prompts.fill(template, "en", question=topic(1, 6)),
                                   max_new_tokens=rag.config.clue_max_new_tokens)
        assert answer.raw_clues[kind] == alone  # the reused keys and values give the reply read whole


def test_a_local_generator_writes_a_batch_of_gists_in_one_decoding_each_as_alone(tmp_path, monkeypatch):
    from memorag.generation import LocalGenerator
    from memorag.runtime.decode_loop import DecodeBatch
    from tests.pipeline.conftest import tiny_model

    runs = []
    original = DecodeBatch.run
    monkeypatch.setattr(DecodeBatch, "run", lambda self, requests, *args: runs.append(len(requests))
                        or original(self, requests, *args))
    model = tiny_model()
    generator = LocalGenerator.from_memory_model(model)
    rag = make_rag(model, generator=generator, mode="memorag-lite",
                   lite={"window_tokens": 20, "max_new_tokens": 6, "min_gist_tokens": 2, "batch_size": 4,
                         "checkpoint_dir": str(tmp_path)})
    rag.memorize(corpus_documents(), with_memory=False)
    assert runs == [4, 4, 1]  # 9 windows, 4 at a time
    gists = rag.memorized.gists.gists
    assert len({gist.text for gist in gists}) > 1
    texts = {document.id: document.text for document in corpus_documents()}
    for gist in gists:
        window = texts[gist.window.doc_id][gist.window.start_char:gist.window.end_char]
        alone = generator.generate(prompts.fill(prompts.LITE_GIST, "en", context=window),
                                   max_new_tokens=gist.max_new_tokens)
        assert gist.text == alone


@pytest.mark.slow
def test_a_served_generator_writes_the_gists_and_reads_them(tmp_path):
    """Against the tests' fake OpenAI-compatible server: every gist, clue and answer is a request to it;
    the gists are asked a batch at a time, and each clue request sends the whole memory (the server
    keeps its own prefix cache)."""
    from memorag.generation import OpenAIGenerator
    from tests.pipeline.test_generation import FakeServer

    server = FakeServer()
    try:
        generator = OpenAIGenerator(server.url, "fake-model", context_window=4096, tokenizer=tiny_tokenizer())
        rag = lite_rag(tmp_path, generator, batch_size=4)
        report = rag.memorize(corpus_documents(), with_memory=False)
        assert report.num_gists == 9 and len(server.requests) == 9
        gist_prompt = prompts.LITE_GIST["en"].split("{")[0]
        assert all(request["messages"][-1]["content"].startswith(gist_prompt) for request in server.requests)
        assert [gist.text for gist in rag.memorized.gists.gists] == ["Mordecai raised her."] * 9
        answer = rag.ask(topic(1, 6))
        asked = [request["messages"][-1]["content"] for request in server.requests[9:]]
        memory = rag.memorized.gists.prefix()
        assert len(asked) == 4 and all(prompt.startswith(memory) for prompt in asked[:3])  # three clues, one answer
        assert answer.answer == "Mordecai raised her." and answer.evidence
    finally:
        server.close()


def test_search_and_the_integrations_use_the_lite_clues_when_it_is_the_mode(tmp_path):
    from memorag.pipeline.search import search

    generator = FakeGistGenerator(reply=topic(2, 4))
    rag = lite_rag(tmp_path, generator)
    rag.memorize(corpus_documents(), with_memory=False)
    clues, raw = rag.clues(topic(0, 4))
    assert set(raw) == {"spans", "questions", "draft"} and clues == [topic(2, 4)]
    assert rag.memorized.gists.prefix() + prompts.fill(prompts.LITE_SPANS, "en", question=topic(0, 4)) in generator.prompts
    result = search(rag, topic(0, 4), k=3)
    assert result.clues == [topic(2, 4)] and "gamma" in {item.doc_id for item in result.evidence}


def test_memorize_in_the_lite_mode_builds_no_beacon_memory_unless_asked(tmp_path):
    rag = lite_rag(tmp_path)
    rag.memorize(corpus_documents())
    assert rag.memory is None and len(rag.memorized.gists) == 9
    both = lite_rag(tmp_path / "both")
    both.memorize(corpus_documents(), with_memory=True)
    assert both.memory is not None and len(both.memorized.gists) == 9


class FakeReader(FakeGistGenerator):
    """A fake reader: its replies are answers; its `memory_writer`, another fake, writes gists and clues."""

    name = "fake-reader"

    def __init__(self):
        super().__init__(reply="the reader's answer")
        self.writer = FakeGistGenerator(reply="a clue of the writer")

    @property
    def memory_writer(self):
        return self.writer


def test_a_reader_s_memory_writer_writes_the_gists_and_the_clues_and_the_reader_answers(tmp_path):
    reader = FakeReader()
    rag = lite_rag(tmp_path, reader)
    rag.memorize(corpus_documents(), with_memory=False)
    answer = rag.ask(topic(1, 6))
    assert reader.writer.gists_written == 9 and reader.gists_written == 0
    assert {gist.writer for gist in rag.memorized.gists.gists} == {"fake-gists"}
    assert set(answer.raw_clues.values()) == {"a clue of the writer"} and answer.answer == "the reader's answer"
    assert all(not prompt.startswith(rag.memorized.gists.prefix()) for prompt in reader.prompts)


def test_a_metered_reader_counts_its_memory_writer_s_calls_in_the_same_ask():
    from memorag.evaluation.measure import MeteredGenerator

    metered = MeteredGenerator(FakeReader())
    metered.memory_writer.generate("one two three")
    metered.generate("four five")
    assert metered.take() == [3, 2] and metered.take() == []
    metered.memory_writer.generate("six")
    assert metered.take() == [1]
    assert MeteredGenerator(FakeGistGenerator()).memory_writer.inner.name == "fake-gists"
