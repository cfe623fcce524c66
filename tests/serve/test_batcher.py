"""The batcher, the worker's jobs and their turns, with a fake model engine (`FakeCountingRows`)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import torch

from memorag.runtime.decode_loop import DecodeBatch, Stops
from memorag.serve.batching import Batcher
from memorag.serve.turns import CorpusAccess, TurnLock
from memorag.serve.worker import JobCancelled, ModelWorker

VOCAB = 1000


class FakeCountingRows:
    """A fake engine: a row's first token is its prompt's first id, and each step adds one; `delay` seconds a step."""

    def __init__(self, delay: float = 0.02):
        self.delay = delay
        self.last: list[int] = []

    def prompt_ids(self, prompt):
        return prompt

    def _logits(self, tokens: list[int]) -> torch.Tensor:
        return torch.nn.functional.one_hot(torch.tensor(tokens) % VOCAB, VOCAB).float()

    def prefill(self, prompts, max_new_tokens):
        self.last += [prompt[0] for prompt in prompts]
        return self._logits([prompt[0] for prompt in prompts])

    def remove(self, index):
        self.last.pop(index)

    def decode_step(self, tokens):
        time.sleep(self.delay)
        self.last = [token + 1 for token in tokens]
        return self._logits(self.last)


def run_jobs(worker: ModelWorker, calls):
    """Submit each of `calls` as a job; the results (or exceptions) in order."""

    async def main():
        jobs = [worker.submit(call) for call in calls]
        return await asyncio.gather(*(job.future for job in jobs), return_exceptions=True), jobs

    return asyncio.run(main())


def test_a_cancelled_job_leaves_the_batch_and_the_others_get_all_their_tokens():
    worker = ModelWorker(batch_size=3)
    batcher = Batcher(worker, {"fake": DecodeBatch(FakeCountingRows(), Stops())})
    try:
        def decoding(start: int, cancel_after: int | None):
            def call():
                seen = []

                def on_token(token):
                    seen.append(token)
                    if cancel_after is not None and len(seen) == cancel_after:
                        worker.current().cancel("the client left")

                return batcher.decode("fake", [[start]], 20, on_token=on_token)[0], seen
            return call

        results, _ = run_jobs(worker, [decoding(100, None), decoding(500, 3), decoding(900, None)])
    finally:
        worker.shutdown()
        batcher.stop()
    assert results[0] == (list(range(100, 120)), list(range(100, 120)))
    assert isinstance(results[1], JobCancelled) and "client left" in str(results[1])
    assert results[2] == (list(range(900, 920)), list(range(900, 920)))
    sizes = batcher.steps_by_size()
    assert max(sizes) == 3 and 2 in sizes  # decoded together, then without the third
    assert worker.pending == 0


def test_a_job_past_its_time_limit_is_stopped_while_its_tokens_decode():
    worker = ModelWorker(time_limit=0.3, batch_size=2)
    batcher = Batcher(worker, {"fake": DecodeBatch(FakeCountingRows(delay=0.05), Stops())})
    try:
        started = time.monotonic()
        results, _ = run_jobs(worker, [lambda: batcher.decode("fake", [[1]], 1000)])
        took = time.monotonic() - started
    finally:
        worker.shutdown()
        batcher.stop()
    assert isinstance(results[0], JobCancelled) and "time limit" in str(results[0])
    assert took < 5  # not the 50 s the 1,000 steps would take


def test_stop_tokens_and_budgets_end_rows_and_several_prompts_of_one_job_decode_together():
    worker = ModelWorker(batch_size=1)
    batcher = Batcher(worker, {"fake": DecodeBatch(FakeCountingRows(delay=0), Stops.of([7]))})
    try:
        results, _ = run_jobs(worker, [lambda: batcher.decode("fake", [[3], [10], [40]], 5)])
    finally:
        worker.shutdown()
        batcher.stop()
    assert results[0] == [[3, 4, 5, 6], [10, 11, 12, 13, 14], [40, 41, 42, 43, 44]]
    assert batcher.describe()["max_rows"] == 3


def test_the_models_go_to_the_oldest_waiting_job_first():
    lock, order = TurnLock(), []
    lock.acquire()
    threads = [threading.Thread(target=lambda p=p: (lock.acquire(p), order.append(p), lock.release()))
               for p in (5, 2, 9, 1)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # each is waiting before the next comes
    lock.release()
    for thread in threads:
        thread.join(5)
    assert order == [1, 2, 5, 9]


def test_a_write_waits_for_the_reads_and_goes_before_reads_that_come_after_it():
    access, events = CorpusAccess(), []
    first_read = threading.Event()
    release_read = threading.Event()

    def reader(name: str, hold: threading.Event | None = None):
        with access.reading("c0"):
            events.append(f"{name} in")
            if hold is not None:
                first_read.set()
                hold.wait(5)
        events.append(f"{name} out")

    def writer():
        with access.writing("c0"):
            events.append("write")

    with access.reading("c1"):  # another corpus never waits
        pass
    threads = [threading.Thread(target=reader, args=("read 1", release_read))]
    threads[0].start()
    first_read.wait(5)
    threads.append(threading.Thread(target=writer))
    threads[1].start()
    time.sleep(0.1)
    threads.append(threading.Thread(target=reader, args=("read 2",)))
    threads[2].start()
    time.sleep(0.1)
    assert events == ["read 1 in"]  # the write waits for read 1, read 2 waits for the write
    release_read.set()
    for thread in threads:
        thread.join(5)
    assert events == ["read 1 in", "read 1 out", "write", "read 2 in", "read 2 out"]


def test_a_batch_size_below_one_is_refused():
    with pytest.raises(ValueError, match="batch_size=0"):
        ModelWorker(batch_size=0)
