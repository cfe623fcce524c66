"""Measuring cost: the tokens a generator is given, the evidence's own tokens, and the peak memory of a stage.

Evidence tokens: :func:`evidence_tokens` is the size of the evidence a mode gave the generator,
the sum of each piece's ``num_tokens`` (a chunk's count in the chunking tokenizer, a whole
document's or cut span's as the mode counted it; two overlapping chunks each count the tokens
they share). It is reported beside every recall and score, so that modes are compared at the
evidence they read; the generator's whole prompt (instructions, question, offered draft) is the
generator-token count below.

Tokens: :class:`MeteredGenerator` wraps the generator every mode shares and, for
each call, records ``count_tokens(prompt, system)`` of exactly what it was given (for a
prompt measured beforehand, ``generate_measured``, the count that measure gave):
the generator's own count (exact for local models: chat template included;
an estimate for HTTP endpoints, as their ``count_tokens`` says). Whatever a mode
does, the count is what reached the generator; a prompt whose prefix the generator
had cached (``generate_with_prefix``) counts whole, since the model reads it all. The memory model's own reading
(memorizing, writing clues, answering from memory) is not generator input and is
reported apart (memorize time, memory tokens).

Peak memory: :class:`PeakMemory` measures the peak resident set size (RSS) of the
process during a stage. On Linux it resets the kernel's high-water mark before
the stage (writing ``5`` to ``/proc/self/clear_refs``) and reads ``VmHWM`` from
``/proc/self/status`` after it: the true peak of that stage, everything the
process holds included (model weights, torch's CPU allocations, Python
objects), so it is never below the memory held before the stage began. Where the
reset is not allowed, the value is ``ru_maxrss``, the peak of the whole process
so far, and ``scope`` says ``"process"`` instead of ``"stage"``. On a CUDA
device the stage's peak allocated by torch is read too (``torch.cuda``'s peak
statistics, reset before the stage).
"""

from __future__ import annotations

import re
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from memorag.generation import Generator, PromptTokens
from memorag.generation.base import WrappedGenerator
from memorag.modes.results import Evidence

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")
_HWM = re.compile(r"^VmHWM:\s+(\d+)\s+kB", re.MULTILINE)


def evidence_tokens(evidence: Sequence[Evidence]) -> int:
    """The tokens of the evidence given to the generator (see the module docstring)."""
    return sum(item.num_tokens for item in evidence)


class MeteredGenerator(WrappedGenerator):
    """Passes every call on to `inner`, counting the prompt tokens of each call."""

    def __init__(self, inner: Generator):
        super().__init__(inner)
        self.prompt_tokens: list[int] = []

    def generate(self, prompt: str, *, system: str | None = None, max_new_tokens: int = 256,
                 on_text: Callable[[str], None] | None = None) -> str:
        self.prompt_tokens.append(self.inner.count_tokens(prompt, system))
        return self.inner.generate(prompt, system=system, max_new_tokens=max_new_tokens, on_text=on_text)

    def generate_with_prefix(self, prefix: str, rest: str, *, system: str | None = None, max_new_tokens: int = 256,
                             on_text: Callable[[str], None] | None = None) -> str:
        # the whole prompt counts, even when the inner generator reuses a cached prefix
        self.prompt_tokens.append(self.inner.count_tokens(prefix + rest, system))
        return self.inner.generate_with_prefix(prefix, rest, system=system, max_new_tokens=max_new_tokens,
                                               on_text=on_text)

    def generate_batch(self, prompts: Sequence[str], *, system: str | None = None,
                       max_new_tokens: int = 256) -> list[str]:
        self.prompt_tokens += [self.inner.count_tokens(prompt, system) for prompt in prompts]
        return self.inner.generate_batch(prompts, system=system, max_new_tokens=max_new_tokens)

    def generate_measured(self, measured: PromptTokens, *, max_new_tokens: int = 256,
                          on_text: Callable[[str], None] | None = None) -> str:
        self.prompt_tokens.append(measured.count)
        return self.inner.generate_measured(measured, max_new_tokens=max_new_tokens, on_text=on_text)

    @property
    def memory_writer(self) -> Generator:
        """The inner generator's memory writer, its calls counted here too (one count per ask)."""
        writer = self.inner.memory_writer
        if writer is self.inner:
            return self
        metered = MeteredGenerator(writer)
        metered.prompt_tokens = self.prompt_tokens
        return metered

    def count_tokens(self, prompt: str, system: str | None = None) -> int:
        return self.inner.count_tokens(prompt, system)

    def measure(self, prompt: str, system: str | None = None) -> PromptTokens:
        return self.inner.measure(prompt, system)

    def tokens_within(self, measured: PromptTokens, start: int, end: int) -> int:
        return self.inner.tokens_within(measured, start, end)

    def check(self) -> None:
        self.inner.check()

    def describe(self) -> dict:
        return self.inner.describe()

    def __getattr__(self, name: str):
        # anything else a mode reads from its generator (a tokenizer, a model) is the inner one's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def take(self) -> list[int]:
        """The prompt tokens of each call since the last `take`, and start counting anew."""
        calls = list(self.prompt_tokens)
        self.prompt_tokens.clear()  # in place: a memory writer's wrapper counts into the same list
        return calls


def _can_reset_peak() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        _CLEAR_REFS.write_text("5")
        return _HWM.search(_STATUS.read_text()) is not None
    except OSError:
        return False


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


class PeakMemory:
    """Peak RSS (and peak CUDA memory allocated by torch) of stages; see the module docstring."""

    def __init__(self) -> None:
        self.scope = "stage" if _can_reset_peak() else "process"
        self.cuda = _cuda_available()

    @contextmanager
    def stage(self, into: dict[str, float], name: str) -> Iterator[None]:
        """Measure the block: ``into[name + "_rss_mb"]`` (and ``_cuda_mb``) and ``into[name + "_s"]``."""
        if self.scope == "stage":
            _CLEAR_REFS.write_text("5")
        if self.cuda:
            import torch

            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        try:
            yield
        finally:
            into[f"{name}_s"] = round(time.perf_counter() - started, 4)
            into[f"{name}_rss_mb"] = round(self._rss_peak_kb() / 1024, 1)
            if self.cuda:
                import torch

                into[f"{name}_cuda_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)

    def _rss_peak_kb(self) -> int:
        if self.scope == "stage":
            match = _HWM.search(_STATUS.read_text())
            if match is not None:
                return int(match.group(1))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS, kB elsewhere
