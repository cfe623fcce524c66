"""The memory model decodes through transformers' `generate`: today's greedy ids are reproduced
token for token (pinned in data/decoding_golden.json by the loop it replaced, see
decoding_cases.py; the bf16 embedded model's up to exact ties of its logits, which CPUs break
differently), `generate`'s options work, and a batch equals one-by-one decoding."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.memory import decoding_cases as cases

GOLDEN = json.loads(cases.GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", cases.TINY_CASES, ids=[case["name"] for case in cases.TINY_CASES])
def test_tiny_models_reproduce_the_pinned_greedy_ids(case):
    model = cases.tiny_model(case)
    memory = model.memorize(cases.tiny_memory_ids())
    golden = GOLDEN["tiny"][case["name"]]
    for prompt, expected in zip(cases.TINY_PROMPTS, golden["with_memory"], strict=True):
        assert model.generate_ids(list(prompt), memory=memory, max_new_tokens=cases.TINY_NEW_TOKENS) == expected
    assert model.generate_ids(list(cases.TINY_PROMPTS[1]), max_new_tokens=cases.TINY_NEW_TOKENS) == golden["no_memory"]


@pytest.fixture(scope="module")
def tiny():
    model = cases.tiny_model(cases.TINY_CASES[0])
    return model, model.memorize(cases.tiny_memory_ids()), GOLDEN["tiny"][cases.TINY_CASES[0]["name"]]["with_memory"]


def test_a_stop_token_ends_the_reply_where_the_loop_ended_it(tiny):
    model, memory, golden = tiny
    expected = golden[0]
    stop = expected[7]  # a token the greedy reply reaches after a few others
    model.base_model.config.eos_token_id = stop
    try:
        seen: list[int] = []
        ids = model.generate_ids(list(cases.TINY_PROMPTS[0]), memory=memory, max_new_tokens=cases.TINY_NEW_TOKENS,
                                 on_token=seen.append)
    finally:
        model.base_model.config.eos_token_id = 1
    assert ids == expected[: expected.index(stop)] == seen


def test_generate_options_work_on_the_memory(tiny):
    from transformers import StoppingCriteria, StoppingCriteriaList

    model, memory, golden = tiny
    prompt = list(cases.TINY_PROMPTS[1])
    before = [k.clone() for k in memory.keys]
    assert model.generate_ids(prompt, memory=memory, max_new_tokens=5) == golden[1][:5]
    # sampling that can only keep the likeliest token is greedy
    assert model.generate_ids(prompt, memory=memory, max_new_tokens=12, do_sample=True, top_p=1e-9) == golden[1][:12]
    assert model.generate_ids(prompt, memory=memory, max_new_tokens=12, do_sample=True, top_k=1) == golden[1][:12]
    # a seed makes sampling reproducible and leaves the global generator as it was
    state = torch.random.get_rng_state()
    first = model.generate_ids(prompt, memory=memory, max_new_tokens=24, do_sample=True, temperature=1.5, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert model.generate_ids(prompt, memory=memory, max_new_tokens=24, do_sample=True, temperature=1.5,
                              seed=5) == first
    others = {tuple(model.generate_ids(prompt, memory=memory, max_new_tokens=24, do_sample=True, temperature=1.5,
                                       seed=seed)) for seed in range(6, 9)}
    assert others != {tuple(first)} and first != golden[1][:24]

    class AfterThree(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[1] >= len(prompt) + 3, dtype=torch.bool)

    assert model.generate_ids(prompt, memory=memory, max_new_tokens=20,
                              stopping_criteria=StoppingCriteriaList([AfterThree()])) == golden[1][:3]

    class Collect:
        def __init__(self):
            self.calls: list[list[int]] = []

        def put(self, value):
            self.calls.append(value.reshape(-1).tolist())

        def end(self):
            self.calls.append(["end"])

    streamer, seen = Collect(), []
    ids = model.generate_ids(prompt, memory=memory, max_new_tokens=6, streamer=streamer, on_token=seen.append)
    assert ids == seen == golden[1][:6]
    assert streamer.calls == [prompt, *[[token] for token in ids], ["end"]]
    # repetition_penalty changes the greedy reply (the pinned one repeats tokens)
    assert model.generate_ids(prompt, memory=memory, max_new_tokens=24, repetition_penalty=5.0) != golden[1][:24]
    assert all(torch.equal(k, b) for k, b in zip(memory.keys, before, strict=True))  # the memory is never changed


def test_beam_search_is_refused_with_the_reason(tiny):
    model, memory, _ = tiny
    with pytest.raises(ValueError, match="num_beams=2 is not supported"):
        model.generate_ids([5, 6], memory=memory, num_beams=2)
    with pytest.raises(ValueError, match="on_token streams one sequence"):
        model.generate_ids_batch([[5, 6], [7]], memory=memory, on_token=print)


@pytest.mark.parametrize("case", cases.TINY_CASES, ids=[case["name"] for case in cases.TINY_CASES])
def test_a_batch_equals_one_by_one_decoding(case):
    # prompts of 3, 10 and 1 tokens after a memory with 13 tokens in its window of 16: the
    # sequences insert memory tokens and complete windows at different steps
    model = cases.tiny_model(case)
    memory = model.memorize(cases.tiny_memory_ids())
    golden = GOLDEN["tiny"][case["name"]]["with_memory"]
    prompts = [list(prompt) for prompt in cases.TINY_PROMPTS]
    assert model.generate_ids_batch(prompts, memory=memory, max_new_tokens=cases.TINY_NEW_TOKENS) == golden
    assert model.generate_ids_batch(prompts[::-1], memory=memory, max_new_tokens=cases.TINY_NEW_TOKENS) == golden[::-1]
    # without a memory, and with a stop token that ends one sequence early while the others go on
    alone = [model.generate_ids(prompt, max_new_tokens=cases.TINY_NEW_TOKENS) for prompt in prompts]
    assert model.generate_ids_batch(prompts, max_new_tokens=cases.TINY_NEW_TOKENS) == alone
    stop = golden[1][4]
    model.base_model.config.eos_token_id = stop
    try:
        alone = [model.generate_ids(prompt, memory=memory, max_new_tokens=cases.TINY_NEW_TOKENS) for prompt in prompts]
        batch = model.generate_ids_batch(prompts, memory=memory, max_new_tokens=cases.TINY_NEW_TOKENS)
    finally:
        model.base_model.config.eos_token_id = 1
    assert batch == alone and len(alone[1]) == golden[1].index(stop) < max(len(ids) for ids in alone)


@pytest.fixture(scope="module")
def embedded():
    from memorag.memory import MemoryModel

    model = MemoryModel.from_pretrained("embedded", dtype=torch.bfloat16)  # the pinned ids are bf16's on every CPU
    memory = model.memorize(cases.embedded_context(), show_progress=False)
    return model, memory


class FollowPinned:
    """A logits processor that leads every row of a batch along its pinned ids (then its likeliest
    stop token) and records, at each step, how far the pinned token's score lies below the best.

    The embedded model decodes in bf16, whose logits are spaced one bf16 step apart (0.125 near
    20): two tokens can tie exactly, and which one a CPU's kernels put ahead depends on their
    summation order (the pinned ids of the earlier weights were recorded on an AVX-512 CPU without
    AMX, and on an AMX CPU prompt 0 met an exact tie at its 32nd token and prompt 2 put its pinned
    token one step below another twice; the current ids were recorded on an AVX2 CPU). Following the pinned ids checks every step of them, instead of only
    the steps before the first tie."""

    def __init__(self, pinned: list[list[int]], width: int, stops: list[int]):
        self.pinned, self.width, self.stops = pinned, width, stops
        self.gaps: list[list[float]] = [[] for _ in pinned]
        self.steps: list[list[float]] = [[] for _ in pinned]

    def __call__(self, input_ids, scores):
        step = input_ids.shape[1] - self.width
        forced = torch.full_like(scores, float("-inf"))
        for row, ids in enumerate(self.pinned):
            if step < len(ids):
                target = ids[step]
            else:  # the pinned reply ended here: its next token was a stop token
                target = max(self.stops, key=lambda token: float(scores[row, token]))
            if step <= len(ids):
                best = scores[row].max()
                self.gaps[row].append(float(best - scores[row, target]))
                self.steps[row].append(_bf16_step(float(best)))
            forced[row, target] = 0.0
        return forced


def _bf16_step(value: float) -> float:
    """The spacing of bf16 numbers at `value` (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(abs(value))) - 7) if value else 0.0


@pytest.mark.slow
def test_the_embedded_model_reproduces_the_pinned_greedy_ids_and_batches_exactly(embedded):
    from transformers import LogitsProcessorList

    from memorag.runtime.stop_tokens import stop_token_ids

    model, memory = embedded
    golden = GOLDEN["embedded"]
    assert (memory.num_tokens, memory.state.raw_in_window) == (golden["memory_tokens"], golden["raw_in_window"])
    window = model.config.window
    prompt_ids = [model.prompt_ids(prompt, memory) for prompt in cases.EMBEDDED_PROMPTS]
    # replies cross the window's end: the window is compacted in the middle of decoding
    assert any(memory.state.raw_in_window + len(ids) + len(reply) > window
               for ids, reply in zip(prompt_ids, golden["ids"], strict=True))
    stops = stop_token_ids(model.tokenizer, model.base_model)
    exact_steps = all_steps = 0
    for prompt, ids, pinned in zip(cases.EMBEDDED_PROMPTS, prompt_ids, golden["ids"], strict=True):
        follow = FollowPinned([pinned], len(ids), stops)
        assert model.generate_ids(prompt, memory=memory, max_new_tokens=cases.EMBEDDED_NEW_TOKENS,
                                  logits_processor=LogitsProcessorList([follow])) == pinned
        # at every step the pinned token is the likeliest, or behind it by at most two bf16 steps: each
        # of the two scores may round one step the other way on another CPU
        assert all(gap <= 2 * step for gap, step in zip(follow.gaps[0], follow.steps[0], strict=True)), follow.gaps[0]
        exact_steps += sum(gap == 0.0 for gap in follow.gaps[0])
        all_steps += len(follow.gaps[0])
    assert exact_steps >= 0.95 * all_steps
    # free greedy decoding of the batch equals one-by-one decoding on this CPU, token for token
    alone = [model.generate_ids(prompt, memory=memory, max_new_tokens=cases.EMBEDDED_NEW_TOKENS)
             for prompt in cases.EMBEDDED_PROMPTS]
    batch = model.generate_ids_batch(list(cases.EMBEDDED_PROMPTS), memory=memory,
                                     max_new_tokens=cases.EMBEDDED_NEW_TOKENS)
    assert batch == alone
    assert sum(len(ids) for ids in alone) > 100
