"""The one decode loop (memorag/runtime/decode_loop.py): sampling from a seed and no global random state,
stop tokens and stop strings, the repetition penalty as transformers' `generate` applies it, sequences
joining and leaving a running batch, and a batch equal to its members decoded alone; the memory model's
decoding and a supported family's generator run through it, any other model through `generate`."""

from __future__ import annotations

import pytest
import torch

from memorag.memory.decoding import MemoryRows
from memorag.runtime.decode_loop import DecodeBatch, Request, Sampling, Stops, choose_token
from tests.memory.conftest import random_ids, tiny_base, tiny_memory_model

VOCAB = 50


class FakeRows:
    """A fake model's rows: each row's next-token logits are a fixed random function of (its first prompt id,
    its last token), so a row's reply depends on nothing but its own tokens."""

    def __init__(self):
        self.firsts: list[int] = []
        self.prefills: list[int] = []  # how many prompts each prefill read together

    def prompt_ids(self, prompt):
        return prompt

    def _logits(self, first: int, token: int) -> torch.Tensor:
        return torch.randn(VOCAB, generator=torch.Generator().manual_seed(1000 * first + token)) * 3

    def prefill(self, prompts, max_new_tokens):
        self.prefills.append(len(prompts))
        self.firsts += [prompt[0] for prompt in prompts]
        return torch.stack([self._logits(prompt[0], prompt[-1]) for prompt in prompts])

    def decode_step(self, tokens):
        return torch.stack([self._logits(first, token) for first, token in zip(self.firsts, tokens, strict=True)])

    def remove(self, index):
        self.firsts.pop(index)


def _run(sampling: Sampling, prompts, budget: int = 20, stops: Stops = Stops()) -> list[list[int]]:
    return DecodeBatch(FakeRows(), stops, sampling).run([Request(i, p, budget) for i, p in enumerate(prompts)])


def test_sampling_is_reproducible_from_a_seed_and_reads_no_global_random_state():
    sampling = Sampling(do_sample=True, temperature=1.3, top_p=0.9, top_k=20, seed=11)
    torch.manual_seed(0)
    state = torch.random.get_rng_state()
    first = _run(sampling, [[3, 4], [5]])
    assert torch.equal(torch.random.get_rng_state(), state)  # nothing drawn from, nothing reseeded
    torch.manual_seed(12345)  # another global state changes nothing
    assert _run(sampling, [[3, 4], [5]]) == first
    assert _run(Sampling(do_sample=True, temperature=1.3, top_p=0.9, top_k=20, seed=12), [[3, 4], [5]]) != first
    assert first != _run(Sampling(), [[3, 4], [5]])  # it did sample
    # the i-th sequence of a call draws from seed + i: alone with that seed it draws the same
    assert _run(Sampling(do_sample=True, temperature=1.3, top_p=0.9, top_k=20, seed=12), [[5]])[0] == first[1]


def test_filters_that_keep_one_token_are_greedy():
    greedy = _run(Sampling(), [[7, 8]])
    assert _run(Sampling(do_sample=True, top_k=1, seed=1), [[7, 8]]) == greedy
    assert _run(Sampling(do_sample=True, top_p=1e-9, seed=1), [[7, 8]]) == greedy
    assert _run(Sampling(do_sample=True, temperature=0.0, seed=1), [[7, 8]]) == greedy  # temperature 0: greedy


def test_stop_tokens_end_a_reply_and_stop_strings_end_it_with_the_token_that_completes_them():
    reply = _run(Sampling(), [[9]], budget=12)[0]
    assert len(reply) == 12
    stop = reply[5]
    assert _run(Sampling(), [[9]], 12, Stops.of([stop]))[0] == reply[: reply.index(stop)]
    text_of = lambda ids: "".join(f"<{token}>" for token in ids)  # noqa: E731  (a fake tokenizer's text)
    string = f"{reply[3]}><{reply[4]}"
    end = next(length for length in range(1, 13) if string in text_of(reply[:length]))  # the first reply with it
    assert _run(Sampling(), [[9]], 12, Stops.of([], [string], text_of))[0] == reply[:end]
    assert end <= 5
    with pytest.raises(ValueError, match="need the tokenizer"):
        Stops.of([], ["x"])


def test_min_new_tokens_holds_the_stop_tokens_back():
    reply = _run(Sampling(), [[9]], budget=12)[0]
    stops = Stops.of([reply[0]])
    assert _run(Sampling(), [[9]], 12, stops)[0] == []
    held = DecodeBatch(FakeRows(), stops).run([Request(0, [9], 6, min_new_tokens=3)])[0]
    assert len(held) >= 3 and reply[0] not in held[:3]


def test_the_repetition_penalty_is_transformers_own():
    from transformers import RepetitionPenaltyLogitsProcessor

    scores = torch.randn(1, VOCAB, generator=torch.Generator().manual_seed(3)) * 4
    seen = torch.tensor([[1, 4, 4, 7, 30, 2]])
    for penalty in (0.7, 1.3, 5.0):
        expected = RepetitionPenaltyLogitsProcessor(penalty)(seen, scores.clone())
        token, got = choose_token(scores[0], Sampling(repetition_penalty=penalty), seen, None)
        assert torch.equal(got, expected) and token == int(expected.argmax())


def test_sequences_join_and_leave_a_running_batch_and_get_what_they_get_alone():
    prompts = {key: [key + 2, key + 3] for key in range(5)}
    budgets = {0: 9, 1: 3, 2: 12, 3: 6, 4: 8}
    alone = {key: _run(Sampling(), [prompts[key]], budgets[key])[0] for key in prompts}
    rows = FakeRows()
    batch, got = DecodeBatch(rows, Stops()), {}
    joins = {0: [0, 1], 2: [2, 3], 5: [4]}
    for step in range(30):
        batch.join_all([Request(key, prompts[key], budgets[key]) for key in joins.get(step, [])])
        if step == 4:
            batch.leave(3)  # its caller went away
        got.update({row.key: row.new_ids for row in batch.step()})
    assert rows.prefills == [2, 2, 1]  # those that join at one step are prefilled together
    assert got == {key: ids for key, ids in alone.items() if key != 3} and len(batch) == 0


@pytest.mark.parametrize("plan", ["exact", "alone"])
def test_memory_prompts_joining_a_running_batch_equal_their_lone_decoding(plan):
    model = tiny_memory_model("llama", seed=3)
    memory = model.memorize(random_ids(45, seed=7)[0].tolist())
    prompts = [random_ids(length, seed=length)[0].tolist() for length in (3, 10, 1, 6)]
    alone = [model.generate_ids(prompt, memory=memory, max_new_tokens=14) for prompt in prompts]
    batch, got = DecodeBatch(MemoryRows(model, plan), Stops.of(model.stop_ids())), {}
    joins = {0: [0, 1], 3: [2], 6: [3]}
    for step in range(40):
        batch.join_all([Request(i, (prompts[i], memory), 14) for i in joins.get(step, [])])
        got.update({row.key: row.new_ids for row in batch.step()})
    assert got == dict(enumerate(alone))


def test_a_sampled_memory_batch_draws_for_each_prompt_what_it_draws_alone():
    model = tiny_memory_model("llama", seed=3)
    memory = model.memorize(random_ids(45, seed=7)[0].tolist())
    prompts = [[5, 7, 9], [11, 12, 13, 14]]
    options = dict(max_new_tokens=16, do_sample=True, temperature=1.5, top_p=0.95)
    batch = model.generate_ids_batch(prompts, memory, seed=21, **options)
    assert batch == [model.generate_ids(prompts[0], memory, seed=21, **options),
                     model.generate_ids(prompts[1], memory, seed=22, **options)]
    assert batch != model.generate_ids_batch(prompts, memory, max_new_tokens=16)


def test_options_the_loop_does_not_take_are_refused_by_name():
    model = tiny_memory_model("llama", seed=3)
    with pytest.raises(ValueError, match="num_beams=2 is not supported.*leave num_beams out"):
        model.generate_ids([5, 6], num_beams=2)
    with pytest.raises(ValueError, match="watch one sequence"):
        model.generate_ids_batch([[5, 6], [7]], logits_processor=lambda ids, scores: scores)


def test_the_generator_decodes_a_supported_family_through_the_loop_and_any_other_through_generate():
    from transformers import GPT2Config, GPT2LMHeadModel

    from memorag.generation import LocalGenerator
    from tests.memory.test_persistence import tiny_tokenizer, word

    prompt = " ".join(word(2 + (i * 5) % 90) for i in range(12))
    llama = LocalGenerator(tiny_base("llama", seed=5), tiny_tokenizer(), repetition_penalty=1.2)
    torch.manual_seed(0)
    gpt2 = LocalGenerator(GPT2LMHeadModel(GPT2Config(vocab_size=96, n_positions=128, n_embd=32, n_layer=2, n_head=2,
                                                     bos_token_id=0, eos_token_id=1)).eval(), tiny_tokenizer())
    assert llama.loop_decodes and not gpt2.loop_decodes
    for generator in (llama, gpt2):
        ids = generator._input_ids(prompt, None)
        stream = type("Stream", (), {"push": lambda self, ids: None})()
        expected = generator._transformers_generate(ids, 10, stream)
        tokenizer = generator.tokenizer
        assert generator.generate(prompt, max_new_tokens=10) == tokenizer.decode(expected, skip_special_tokens=True).strip()


def test_every_local_decoding_runs_the_loop_and_none_calls_transformers_generate(monkeypatch):
    """The call graph, read at run time: the memory model's decodings (one prompt, an exact batch, a shared
    batch, sampling as the RLGF stage samples) and a supported family's generator go through
    `DecodeBatch.run`; transformers' `generate` is never entered."""
    from transformers import GenerationMixin

    from memorag.generation import LocalGenerator
    from tests.memory.test_persistence import tiny_tokenizer

    runs = []
    original = DecodeBatch.run
    monkeypatch.setattr(DecodeBatch, "run", lambda self, *args, **kwargs: runs.append(1) or original(self, *args,
                                                                                                          **kwargs))

    def refused(*args, **kwargs):
        raise AssertionError("transformers' generate was called")

    monkeypatch.setattr(GenerationMixin, "generate", refused)
    model = tiny_memory_model("llama", seed=3)
    model.tokenizer = tiny_tokenizer()
    memory = model.memorize(random_ids(20, seed=7)[0].tolist())
    model.generate_ids([5, 6], memory, max_new_tokens=3)
    model.generate_ids_batch([[5, 6], [7]], memory, max_new_tokens=3)
    model.generate_ids_batch([[5, 6], [7]], memory, max_new_tokens=3, exact=False)
    model.generate_ids_batch([[5, 6], [7]], memory, max_new_tokens=3, do_sample=True, top_p=0.9, seed=1)
    LocalGenerator.from_memory_model(model).generate("ab cd", max_new_tokens=3)
    assert len(runs) == 5


@pytest.mark.parametrize("spread", [0.5, 8.0], ids=["nucleus-beyond-the-candidates", "nucleus-within-them"])
def test_top_p_and_top_k_draw_from_the_tokens_a_full_ranking_keeps(spread):
    """The draw ranks only the likeliest `CANDIDATES` when they hold the nucleus, and the whole vocabulary when
    they do not: either way it draws exactly the tokens a full ranking keeps, in their proportions."""
    from memorag.runtime.decode_loop import CANDIDATES

    vocab = 3 * CANDIDATES
    scores = torch.randn(vocab, generator=torch.Generator().manual_seed(5)) * spread
    for sampling in (Sampling(do_sample=True, top_p=0.9), Sampling(do_sample=True, top_k=2000, top_p=0.95)):
        probabilities = scores.softmax(-1)
        ranked, order = probabilities.sort(descending=True)
        keep = ranked.cumsum(-1) - ranked < sampling.top_p
        if sampling.top_k:
            keep[sampling.top_k:] = False
        kept = set(order[keep].tolist())
        expected = torch.zeros(vocab).index_put_((order[keep],), ranked[keep])
        expected /= expected.sum()
        generator, draws = torch.Generator().manual_seed(0), 3000
        counts = torch.bincount(torch.tensor([choose_token(scores, sampling, None, generator)[0] for _ in range(draws)]),
                                minlength=vocab)
        assert set(counts.nonzero().flatten().tolist()) <= kept
        likeliest = order[:5]  # the frequencies of the likeliest tokens, within sampling error
        assert torch.allclose(counts[likeliest] / draws, expected[likeliest], atol=5 * (1 / draws) ** 0.5)
        if spread < 1:
            assert len(kept) > CANDIDATES and int((counts[order[CANDIDATES:]] > 0).sum()) > 0
