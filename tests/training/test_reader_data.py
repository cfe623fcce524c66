"""The reader's training data: the prompt the pipeline sends, the target the benchmarks score, the splits."""

from __future__ import annotations

import pytest

from memorag.evaluation.datasets.packaged import load_squad
from memorag.evaluation.datasets.schema import EvalExample
from memorag.evaluation.datasets.squad import squad_corpus_task, squad_long_context, squad_split_articles
from memorag.prompting.answer_check import NO_ANSWER_REPLY
from memorag.prompting.answer_forms import AnswerForm
from memorag.retrieval.chunking import Document
from memorag.training.reader_data import (
    CONTEXT_DOC_ID,
    PromptRecorder,
    ReaderModels,
    build_reader_records,
    reader_record,
    reader_target,
    tuning_examples,
    without_answer,
)
from tests.pipeline.conftest import FakeEchoGenerator, FakeHashEmbedder, make_rag, tiny_model, topic


def _example(task: str, question: str, answers: list[str], context: str = "", **meta) -> EvalExample:
    prompt = "longbench:hotpotqa" if task.startswith("hotpotqa") else "ruler:qa"
    support = meta.pop("support", [])
    return EvalExample(id="q1", task=task, question=question, answers=answers, context=context,
                       gold_evidence=[{"kind": "sentence", "text": text} for text in support],
                       meta={"answer_prompt": {"name": prompt}, **meta})


@pytest.mark.parametrize("order", ["best-first", "document"])
def test_the_recorded_prompt_is_the_one_the_rag_mode_sends(order):
    model = tiny_model()
    context = "\n\n".join(topic(number) for number in range(3))
    question = " ".join(topic(1).split()[:4])
    example = _example("squad_v2_dev_longctx", question, [topic(1).split()[5]], context)
    settings = {"chunk_tokens": 16, "overlap_tokens": 4, "hits_per_query": 3, "evidence_tokens": 48,
                "answer_max_new_tokens": 8}
    sent_to = FakeEchoGenerator(context_window=400)
    plain = make_rag(model, generator=sent_to, evidence_order=order, **settings)
    plain.memorize([Document(id=CONTEXT_DOC_ID, text=context)], with_memory=False)
    plain.ask(question, mode="rag", answer_form=AnswerForm("ruler:qa"))
    recorder = PromptRecorder(FakeEchoGenerator(context_window=400))
    models = ReaderModels(model, FakeHashEmbedder(), "fake-hash", recorder)
    record = reader_record(models, make_rag(model, **settings).config, example, order)
    assert record["prompt"] == sent_to.prompts[-1]  # the pipeline's prompt, not a second rendering
    assert record["system"] is None and record["order"] == order and record["passages"] >= 1
    assert record["answer_prompt"] == "ruler:qa"


def test_under_the_cli_s_sentence_form_the_prompt_is_the_cli_s_and_the_span_ends_as_a_sentence():
    model = tiny_model()
    context = "\n\n".join(topic(number) for number in range(3))
    question = " ".join(topic(1).split()[:4])
    answer = topic(1).split()[5]
    example = _example("squad_v2_dev_longctx", question, [answer], context)
    settings = {"chunk_tokens": 16, "overlap_tokens": 4, "hits_per_query": 3, "evidence_tokens": 48,
                "answer_max_new_tokens": 8}
    sent_to = FakeEchoGenerator(context_window=400)
    plain = make_rag(model, generator=sent_to, **settings)
    plain.memorize([Document(id=CONTEXT_DOC_ID, text=context)], with_memory=False)
    plain.ask(question, mode="rag")  # the CLI's default form
    models = ReaderModels(model, FakeHashEmbedder(), "fake-hash", PromptRecorder(FakeEchoGenerator(context_window=400)))
    record = reader_record(models, make_rag(model, **settings).config, example, "best-first", "sentence")
    assert record["prompt"] == sent_to.prompts[-1] and record["system"]  # with the pipeline's system prompt
    assert record["answer_prompt"] == "sentence" and record["target"] in (f"{answer}.", NO_ANSWER_REPLY)
    with pytest.raises(ValueError, match="choose from benchmark, sentence"):
        reader_record(models, make_rag(model, **settings).config, example, "best-first", "essay")


def test_the_target_is_the_answer_only_when_the_evidence_holds_it():
    bridge = _example("hotpotqa_dev_longctx", "Where was the author born?", ["Midland, Michigan"], type="bridge")
    assert reader_target(bridge, "She was born in Midland, Michigan in 1950.") == ("Midland, Michigan", "answer")
    assert reader_target(bridge, "She was born in 1950.") == (NO_ANSWER_REPLY, "not in evidence")
    assert reader_target(bridge, "Midlands of England") == (NO_ANSWER_REPLY, "not in evidence")  # whole words


def test_a_comparison_or_yes_no_answer_needs_every_supporting_sentence():
    support = ["A was founded in 1901.", "B was founded in 1920."]
    comparison = _example("hotpotqa_dev_longctx", "Which is older, A or B?", ["A"], type="comparison",
                          support=support)
    assert reader_target(comparison, " ".join(support)) == ("A", "answer")
    assert reader_target(comparison, support[0] + " A is a club.") == (NO_ANSWER_REPLY, "not in evidence")
    yes_no = _example("hotpotqa_dev_longctx", "Are A and B both clubs?", ["yes"], type="bridge", support=support)
    assert reader_target(yes_no, support[1]) == (NO_ANSWER_REPLY, "not in evidence")
    assert reader_target(yes_no, " ".join(support)) == ("yes", "answer")


def test_an_unanswerable_squad_question_always_gets_the_fixed_reply():
    impossible = _example("squad_v2_dev_longctx", "When did it end?", [], is_impossible=True)
    assert reader_target(impossible, "It ended in 1990.") == (NO_ANSWER_REPLY, "unanswerable")
    answerable = _example("squad_v2_dev_longctx", "When did it end?", ["1990", "in 1990"])
    assert reader_target(answerable, "It ended in 1990.") == ("1990", "answer")


def test_squad_is_split_by_article_and_the_harness_draws_from_the_held_out_half():
    articles = load_squad()
    train, held_out = squad_split_articles(len(articles), "train"), squad_split_articles(len(articles), "eval")
    assert (len(articles), len(train), len(held_out)) == (35, 17, 18)
    assert set(train).isdisjoint(held_out) and set(train) | set(held_out) == set(range(35))
    held_titles = {articles[index]["title"] for index in held_out}
    train_titles = {articles[index]["title"] for index in train}
    for example in squad_long_context(20, 2048, seed=3, answerable="all"):
        assert example.meta["article"] in held_titles and example.meta["split"] == "eval"
    for example in squad_long_context(20, 2048, seed=3, answerable="all", split="train"):
        assert example.meta["article"] in train_titles
        assert not any(title in example.context for title in held_titles if len(title) > 12)
    corpus = squad_corpus_task(10, seed=0, answerable="all")
    assert {document.title for document in corpus.documents} <= held_titles
    with pytest.raises(ValueError, match="split="):
        squad_split_articles(35, "dev")


def test_squad_answerable_and_unanswerable_questions_are_drawn_apart_from_the_tuning_half():
    answerable = tuning_examples("squad", 6, 1024, 0, None, squad_answerable="answerable")
    unanswerable = tuning_examples("squad", 6, 1024, 0, None, squad_answerable="unanswerable")
    assert all(example.answers for example in answerable)
    assert not any(example.answers for example in unanswerable)
    assert all(example.meta["split"] == "train" for example in answerable + unanswerable)


def test_a_twin_is_its_context_without_the_paragraphs_that_hold_the_answer_or_a_supporting_sentence():
    paragraphs = ["Alpha\nThe club was founded in Midland, Michigan.", "Beta\nA river runs north.",
                  "Gamma\nB was founded in 1920.", "Delta\nMidlands of England are green."]
    example = _example("hotpotqa_dev_longctx", "Where was the club founded?", ["Midland, Michigan"],
                       "\n\n".join(paragraphs), support=["B was founded in 1920."])
    twin = without_answer(example)
    assert twin.context == "\n\n".join([paragraphs[1], paragraphs[3]])  # whole words: "Midlands" stays
    assert (twin.id, twin.question, twin.answers) == (example.id, example.question, example.answers)
    yes_no = _example("hotpotqa_dev_longctx", "Are both clubs?", ["yes"], "Yes\nyes indeed.\n\nOther\nno.",
                      support=["no."])
    assert without_answer(yes_no).context == "Yes\nyes indeed."  # "yes" is matched by its support only
    assert without_answer(_example("squad_v2_dev_longctx", "When?", ["1990"], "Nothing here.")) is None


def test_each_answered_sample_is_followed_by_its_twin_whose_target_is_the_fixed_reply():
    model = tiny_model()
    texts = [topic(number) for number in range(3)]
    answer = texts[1].split()[5]
    example = _example("squad_v2_dev_longctx", " ".join(texts[1].split()[:4]), [answer], "\n\n".join(texts))
    settings = {"chunk_tokens": 16, "overlap_tokens": 4, "hits_per_query": 3, "evidence_tokens": 400,
                "answer_max_new_tokens": 8}
    models = ReaderModels(model, FakeHashEmbedder(), "fake-hash", PromptRecorder(FakeEchoGenerator(context_window=900)))
    records = []
    reasons = build_reader_records(models, make_rag(model, **settings).config, [example], records.append, twins=True)
    assert [record.get("twin", False) for record in records] == [False, True]
    plain, twin = records
    assert plain["target"] == answer and twin["target"] == NO_ANSWER_REPLY and twin["why"] == "not in evidence"
    assert (twin["order"], twin["answer_prompt"], twin["id"]) == (plain["order"], plain["answer_prompt"], plain["id"])
    assert answer not in twin["prompt"].replace(example.question, "")
    assert reasons == {"squad_v2_dev_longctx:answer": 1, "squad_v2_dev_longctx:twin not in evidence": 1}
