"""Batched decoding from several threads at once over one model (a LangChain `batch`, a server's
requests): each thread's replies equal the ones it gets alone (each batch's split of its packed rows by
sequence is an argument of its own step, `project` in memory/attention.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.memory import decoding_cases as cases


def test_batches_decoded_in_threads_equal_their_replies_alone():
    case = cases.TINY_CASES[0]
    model = cases.tiny_model(case)
    memory = model.memorize(cases.tiny_memory_ids())
    requests = [[list(p) for p in cases.TINY_PROMPTS], [list(cases.TINY_PROMPTS[2]), list(cases.TINY_PROMPTS[0])],
                [list(cases.TINY_PROMPTS[1])], [[40, 41, 42], [43], [44, 45]]]
    alone = [model.generate_ids_batch(prompts, memory=memory, max_new_tokens=24) for prompts in requests]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            together = list(pool.map(lambda prompts: model.generate_ids_batch(prompts, memory=memory,
                                                                               max_new_tokens=24), requests))
            assert together == alone
    assert all("forward" not in vars(module) for module in model.base_model.modules())
