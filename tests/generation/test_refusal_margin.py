"""The reader's refusal margin: a bias on the first token of the fixed no-answer reply, applied when a reply's
first token is chosen and never after, the same in the one decode loop, in transformers' `generate` and in the
server's batch; the shipped reader's tuned margin read from its folder, a pipeline setting over it, and the
margin in the reader's name.

A tiny random Llama and a word-level tokenizer (fakes) stand in for the embedded LM.
"""

from __future__ import annotations

import json

import pytest

from memorag.generation import GeneratorError, LocalGenerator, load_generator
from memorag.generation.reader_adapter import DECODING_CONFIG, tuned_refusal_margin
from memorag.prompting.answer_check import NO_ANSWER_REPLY
from memorag.runtime import embedded
from memorag.runtime.decode_loop import DecodeBatch, Request, Sampling, Stops
from tests.generation.test_reader_adapter import make_adapter
from tests.memory.conftest import tiny_base
from tests.memory.test_persistence import tiny_tokenizer, word
from tests.pipeline.conftest import tiny_model
from tests.test_decode_loop import FakeRows

PROMPT = " ".join(word(2 + (i * 5) % 90) for i in range(12))


def _greedy(sampling: Sampling, budget: int = 10) -> list[int]:
    return DecodeBatch(FakeRows(), Stops(), sampling).run([Request(0, [9, 4], budget)])[0]


def test_the_opening_bias_moves_the_first_token_only():
    reply = _greedy(Sampling())
    first_logits = FakeRows()._logits(9, 4)
    runner_up = int(first_logits.topk(2).indices[1])
    assert _greedy(Sampling(opening_bias=((reply[0], -1e4),)))[0] == runner_up  # the first token moved
    later = next(token for token in reply[1:] if token != reply[0])
    assert _greedy(Sampling(opening_bias=((later, -1e4),))) == reply  # a later token is never biased
    small = float(first_logits[reply[0]] - first_logits[runner_up]) / 2  # less than the lead: no change
    assert _greedy(Sampling(opening_bias=((reply[0], -small),))) == reply
    with pytest.raises(ValueError, match="finite"):
        Sampling(opening_bias=((3, float("nan")),))


def test_the_margin_targets_the_reply_s_first_token_and_decodes_alike_in_the_loop_and_in_generate():
    tokenizer = tiny_tokenizer()
    generator = LocalGenerator(tiny_base("llama", seed=5), tokenizer, repetition_penalty=1.2, refusal_margin=2.5)
    first = tokenizer(NO_ANSWER_REPLY, add_special_tokens=False)["input_ids"][0]
    assert generator.sampling().opening_bias == ((first, -2.5),)
    assert LocalGenerator(tiny_base("llama", seed=5), tokenizer).sampling().opening_bias == ()
    assert generator.describe()["refusal_margin"] == 2.5
    ids = generator._input_ids(PROMPT, None)
    stream = type("Stream", (), {"push": lambda self, ids: None})()
    plain = LocalGenerator(generator.model, tokenizer, repetition_penalty=1.2)
    greedy_first = plain._transformers_generate(ids, 6, stream)[0]
    # aim the margin at the token the model opens with, so that it changes the reply
    generator.opening_bias = lambda: ((greedy_first, -1e4),)
    moved = generator._transformers_generate(ids, 6, stream)
    assert moved[0] != greedy_first
    assert generator.generate(PROMPT, max_new_tokens=6) == tokenizer.decode(moved, skip_special_tokens=True).strip()
    with pytest.raises(GeneratorError, match="refusal_margin"):
        LocalGenerator(generator.model, tokenizer, refusal_margin=-1)


def test_the_reader_takes_its_tuned_margin_unless_the_pipeline_names_one(tmp_path, monkeypatch):
    model = tiny_model()
    model.name = embedded.EMBEDDED_LM  # stands in for the embedded LM
    make_adapter(model, tmp_path)
    monkeypatch.setattr(embedded, "SHIPPED_READER_DIR", tmp_path)
    untuned = load_generator("embedded", memory_model=model)
    assert untuned.refusal_margin == 0 and "margin" not in untuned.name
    (tmp_path / DECODING_CONFIG).write_text(json.dumps({"refusal_margin": 1.5}))
    tuned = load_generator("embedded", memory_model=model)
    assert tuned.refusal_margin == 1.5 and tuned.name == f"{untuned.name}-margin1.5"
    named = load_generator("embedded", memory_model=model, refusal_margin=0.0)
    assert named.refusal_margin == 0 and named.name == untuned.name
    assert load_generator("embedded-base", memory_model=model).refusal_margin == 0  # the base has no margin
    (tmp_path / DECODING_CONFIG).write_text(json.dumps({"margin": 1}))
    with pytest.raises(GeneratorError, match="not a reader decoding config"):
        tuned_refusal_margin(tmp_path)


def test_the_pipeline_setting_reaches_the_generator_and_is_checked():
    from memorag.pipeline.types import ConfigError, PipelineConfig

    with pytest.raises(ConfigError, match="refusal_margin"):
        PipelineConfig(refusal_margin=-0.5)
    assert PipelineConfig().refusal_margin is None


def test_the_server_s_generator_batch_applies_the_margin():
    from memorag.serve.batching import decode_in_batches

    generator = LocalGenerator(tiny_base("llama", seed=5), tiny_tokenizer(), refusal_margin=3.0)
    worker = type("Worker", (), {})()
    batcher = decode_in_batches(worker, tiny_model(), generator)
    try:
        assert batcher.batches["generator"].sampling == generator.sampling()
    finally:
        batcher.stop()


def test_the_server_batches_only_a_generator_the_loop_decodes():
    """A model of another family keeps transformers' `generate`, one sequence at a time, in the server too."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from memorag.serve.batching import decode_in_batches

    gpt2 = LocalGenerator(GPT2LMHeadModel(GPT2Config(vocab_size=96, n_positions=64, n_embd=32, n_layer=1, n_head=2,
                                                     bos_token_id=0, eos_token_id=1)).eval(), tiny_tokenizer())
    memory_model = tiny_model()
    batcher = decode_in_batches(type("Worker", (), {})(), memory_model, gpt2)
    try:
        views = batcher.model_views(memory_model, gpt2)
        assert set(batcher.batches) == {"memory"} and views["memory_model"].shared_batch is not None
        assert "generator" not in views and gpt2.shared_batch is None and memory_model.shared_batch is None
        assert gpt2.generate("a b c", max_new_tokens=3) == gpt2.generate("a b c", max_new_tokens=3)
    finally:
        batcher.stop()
