"""The server's batched decoding: one thread steps the greedy decodings of every waiting job together.

The server hands its pipelines views of the models (`Batcher.model_views`: `decoding_through` a
`BatchQueue`), so a job that reaches a greedy decoding (an answer of the local generator, the memory
model's clues or answer) calls `Batcher.decode` on its own thread: its prompts are queued for the
batch of their model (`DecodeBatch`, the one decode loop of memorag/runtime/decode_loop.py), the job lets go of the
models (`ModelWorker.models`) and waits. The batcher's thread takes the models for one step
at a time: it prefills the prompts that joined, then gives every running prompt its next
token in one forward pass, and lets go again, so the other jobs' model work (retrieval,
memorizing, prompts being measured) runs between its steps. A prompt leaves the batch
when it stops, reaches its budget, or its job is cancelled (the client left, the time
limit, the server stopping); the waiting job streams its tokens as they come and raises
`JobCancelled` at once when cancelled.

`describe` gives the steps taken by their number of rows (`DecodeBatch.steps_by_size`) and the
time spent prefilling and stepping each batch (`seconds`), for `/health` and the benchmarks.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memorag.generation.batched import LanguageModelRows
from memorag.generation.local import LocalGenerator
from memorag.memory.decoding import MemoryRows
from memorag.runtime.decode_loop import DecodeBatch, Stops
from memorag.runtime.stop_tokens import stop_token_ids
from memorag.serve.worker import Job, ModelWorker

logger = logging.getLogger("memorag.serve")

# How often a waiting job wakes to check whether it was cancelled, when no token came (seconds).
_CHECK_EVERY = 0.2

# Steps a batch takes each time the batcher has the models. A `memorag` ask waits for its clues
# before its answer joins the generator's batch, so the memory's (short, cheap) steps go four at a
# time: the clues end sooner and the ask's path through both batches is shorter.
STEPS_PER_TURN = {"memory": 4, "generator": 1}


@dataclass
class Waiting:
    """One prompt a job waits for: what the batch reads, its budget, and what came back."""

    job: Job | None
    prompt: Any
    max_new_tokens: int
    key: int = 0
    tokens: list[int] = field(default_factory=list)
    done: bool = False
    error: BaseException | None = None
    abandoned: bool = False  # its job stopped waiting

    @property
    def dropped(self) -> bool:
        return self.abandoned or (self.job is not None and (self.job.cancelled or self.job.expired()))


class Batcher:
    """Steps the batches of `batches` (name -> `DecodeBatch`) on a thread of its own, taking
    `worker.models` for each step."""

    def __init__(self, worker: ModelWorker, batches: dict[str, DecodeBatch]):
        self.worker = worker
        self.batches = batches
        self.seconds: Counter[str] = Counter()  # time spent prefilling and stepping, per batch
        self._changed = threading.Condition()
        self._joining: dict[str, list[Waiting]] = {name: [] for name in batches}
        self._running: dict[str, dict[int, Waiting]] = {name: {} for name in batches}
        self._keys = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="memorag-batcher", daemon=True)
        self._thread.start()

    # -- the jobs' side ---------------------------------------------------------------------------
    def decode(self, batch: str, prompts: Sequence[Any], max_new_tokens: int,
               on_token: Callable[[int], None] | None = None) -> list[list[int]]:
        """The greedy tokens of each prompt (each ending before its first stop token), decoded in the
        batch `batch`; called by a job holding the models. `on_token` (one prompt only) gets each
        token as it comes, on the job's thread."""
        if on_token is not None and len(prompts) != 1:
            raise ValueError("on_token streams one prompt; decode the prompts one by one")
        job = self.worker.current()
        waiting = [Waiting(job, prompt, max_new_tokens, next(self._keys)) for prompt in prompts]
        with self._changed:
            if self._stopped:
                raise RuntimeError("the batcher has stopped")
            self._joining[batch].extend(waiting)
            self._changed.notify_all()
        with self.worker.models.released(job.number if job is not None else math.inf):
            self._wait(waiting, on_token)
        return [item.tokens for item in waiting]

    def _wait(self, waiting: list[Waiting], on_token: Callable[[int], None] | None) -> None:
        streamed = 0
        try:
            while True:
                with self._changed:
                    if not all(item.done for item in waiting) and len(waiting[0].tokens) == streamed:
                        self._changed.wait(_CHECK_EVERY)
                    tokens = list(waiting[0].tokens)
                    done = all(item.done for item in waiting)
                    failed = next((item.error for item in waiting if item.error is not None), None)
                if failed is not None:
                    raise failed
                if on_token is not None:
                    for token in tokens[streamed:]:
                        on_token(token)
                streamed = len(tokens)
                self.worker.check()  # cancelled or out of time: the batcher drops the rows at its next step
                if done:
                    return
        except BaseException:
            for item in waiting:
                item.abandoned = True
            raise

    # -- the batcher's thread ---------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._changed:
                while not self._stopped and not self._has_work():
                    self._changed.wait()
                if self._stopped:
                    return
                joining = {name: items for name, items in self._joining.items() if items}
                self._joining = {name: [] for name in self.batches}
            with self.worker.models.turn():  # after every job waiting for the models: they may join the batch
                for name, batch in self.batches.items():
                    for turn in range(STEPS_PER_TURN.get(name, 1)):
                        self._step(name, batch, joining.get(name, []) if turn == 0 else [])

    def _has_work(self) -> bool:
        return any(self._joining.values()) or any(self._running.values())

    def _step(self, name: str, batch: DecodeBatch, joining: list[Waiting]) -> None:
        running = self._running[name]
        finished: list[Waiting] = []
        try:
            started = time.perf_counter()
            for item in joining:
                if not item.dropped:
                    batch.join(item.key, item.prompt, item.max_new_tokens)
                    running[item.key] = item
                else:
                    finished.append(item)
            self.seconds[f"{name} prefill"] += time.perf_counter() - started
            for key, item in list(running.items()):
                if item.dropped:
                    batch.leave(key)
                    finished.append(running.pop(key))
            if not running:
                return
            started = time.perf_counter()
            ended = batch.step()
            self.seconds[f"{name} steps"] += time.perf_counter() - started
            for row in ended:
                running[row.key].tokens = list(row.new_ids)
                finished.append(running.pop(row.key))
            for row in batch.rows:
                running[row.key].tokens = list(row.new_ids)
        except Exception as error:  # every row of this batch fails with it, and the batch starts afresh
            logger.error("a batched decoding step failed", exc_info=error)
            for item in [*running.values(), *joining]:
                item.error = error
                finished.append(item)
            running.clear()
            for row in list(batch.rows):
                batch.leave(row.key)
        finally:
            with self._changed:
                for item in finished:
                    item.done = True
                self._changed.notify_all()

    def stop(self) -> None:
        """Stop the thread (once the jobs have stopped); a later `decode` is refused."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        self._thread.join()

    def model_views(self, memory_model, generator) -> dict[str, Any]:
        """Views of the models (`decoding_through`; the models themselves are not changed) whose greedy
        decodings join this batcher's batches: the memory model's always, the generator's where it has a
        batch here (a local generator the one loop decodes)."""
        views = {"memory_model": memory_model.decoding_through(BatchQueue(self, "memory"))}
        if "generator" in self.batches:
            views["generator"] = generator.decoding_through(BatchQueue(self, "generator"))
        return views

    def steps_by_size(self) -> Counter[int]:
        """Rows per step -> steps taken with that many, over every batch (read from another thread: each
        batch's counts are copied whole first, a C-level copy the batcher's thread cannot change midway)."""
        total: Counter[int] = Counter()
        for batch in self.batches.values():
            total.update(dict(batch.steps_by_size))
        return total

    def describe(self) -> dict[str, Any]:
        """The steps run and their sizes (rows per step), for `/health`."""
        sizes = self.steps_by_size()
        steps = sum(sizes.values())
        rows = sum(size * count for size, count in sizes.items())
        return {"steps": steps, "mean_rows": round(rows / steps, 2) if steps else None,
                "max_rows": max(sizes, default=None),
                "rows_per_step": {str(size): count for size, count in sorted(sizes.items())},
                "seconds": {key: round(value, 2) for key, value in sorted(dict(self.seconds).items())}}


@dataclass(frozen=True)
class BatchQueue:
    """One batch of a batcher as a `SharedBatch` (memorag/runtime/decode_loop.py): what a model view decodes
    through."""

    batcher: Batcher
    name: str

    def decode(self, prompts: Sequence[Any], max_new_tokens: int,
               on_token: Callable[[int], None] | None = None) -> list[list[int]]:
        return self.batcher.decode(self.name, prompts, max_new_tokens, on_token)


def decode_in_batches(worker: ModelWorker, memory_model, generator) -> Batcher:
    """A batcher for the memory model's decodings and, when it is a local one the loop decodes, the
    generator's; `Batcher.model_views` gives the models that decode through it."""
    batches = {"memory": DecodeBatch(MemoryRows(memory_model, "shared"), Stops.of(memory_model.stop_ids()))}
    if isinstance(generator, LocalGenerator) and generator.loop_decodes:
        batches["generator"] = DecodeBatch(LanguageModelRows(generator.model),
                                           Stops.of(stop_token_ids(generator.tokenizer, generator.model)),
                                           generator.sampling())
    return Batcher(worker, batches)
