"""The CPU kernel caches are bounded (memorag/runtime/kernel_caches.py), observed from oneDNN's own log.

The loop is the user's, reduced: one bf16 memory model (576 wide, as the embedded one, but
2 layers over the fake 96-word tokenizer), then memorize, ask (the memory model writes
clues) and drop 10 corpora of different lengths, each loop in a fresh process so that no
earlier test has filled the caches. Every corpus brings new shapes (its last window, its
memory size, each decoding step's attention), so oneDNN compiles new kernels for it.

What the bound guards is read directly, not from resident memory: oneDNN logs every kernel
it is asked for (`ONEDNN_VERBOSE=profile_create`), as a cache hit or a cache miss, keyed by
the kernel's description. A miss for a kernel made earlier in the run means the cache had
evicted it, so the cache held fewer kernels than the run met. Which machines show what, as
measured (the kind is the one `memorag/benchmarking/machine.py` records):
- AVX2 only: bf16 products do not run in oneDNN; no kernel is logged and the guards skip,
  saying so.
- AVX-512 without AVX512-BF16 or AMX: 171 kernels over the 10 corpora (gemm:jit:bf16); with
  the libraries' own capacity (1,024) none is compiled twice, with the bound 109 are. Each
  kernel is small here: unbounded, resident memory grew about 0.5 MB per corpus.
- AMX: the same loop grew resident memory about 16 MB per corpus unbounded, under 0.1 MB
  bounded, when the bound was added (results/benchmarks/memory_bound*.json).
Both settings compute the same memories and clues, bit for bit: a cache decides only whether
a kernel is compiled again, never which kernel runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memorag.runtime.kernel_caches import KERNEL_CACHE_CAPACITY, KERNEL_CACHE_VARIABLES, bound_kernel_caches
from memorag.runtime.memtrim import can_trim, slope_per_step

ROOT = Path(__file__).resolve().parents[1]
CORPORA = 10
BOUND_MB_PER_CORPUS = 2.0  # bounded: under 0.1 measured on every kind that logs kernels
LIBRARY_CAPACITY = "1024"  # oneDNN's and ideep's own default capacity: the code before the bound
CORPUS_DONE = "memorag-test: corpus done"
# "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,...,40x576:576x576,0.17": the fields
# between the event and the trailing time describe the kernel.
KERNEL_EVENT = re.compile(r"^onednn_verbose,(?:v\d+,)?primitive,create(?:_nested)?:cache_(hit|miss),(.*),[^,]*$")


def resident_memory_loop(corpora: int) -> dict[str, list]:
    """RSS (MiB) after each of `corpora` memorize-ask-drop steps over one shared bf16 model, and what
    the model computed (a digest of each memory, the clues it wrote); run in a fresh process (`_run_loop`),
    which prints `CORPUS_DONE` after each corpus so that oneDNN's log can be split by corpus."""
    import hashlib

    import torch

    from memorag.memory import MemoryConfig, MemoryModel
    from memorag.runtime.memtrim import release_memory, resident_mb
    from tests.memory.conftest import perturb_memory_parameters, tiny_base
    from tests.memory.test_persistence import tiny_tokenizer
    from tests.pipeline.conftest import FakeEchoGenerator, FakeHashEmbedder, make_rag, topic, words

    torch.set_num_threads(1)
    base = tiny_base("llama", 0, hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                     num_key_value_heads=3)
    model = MemoryModel(base, MemoryConfig(window=64, ratios=[4]), tokenizer=tiny_tokenizer())
    perturb_memory_parameters(model, 0)
    model = model.eval().to(torch.bfloat16)
    embedder, generator = FakeHashEmbedder(), FakeEchoGenerator()
    run = {"resident": [], "memories": [], "clues": []}
    for step in range(corpora):
        rag = make_rag(model=model, embedder=embedder, generator=generator)
        rag.memorize(words(step, 40 + 37 * step), show_progress=False)  # 40 .. 373 tokens: new lengths each
        answer = rag.ask(topic(1, 6))
        digest = hashlib.sha256()
        for tensor in [*rag.memory.keys, *rag.memory.values]:
            digest.update(tensor.float().numpy().tobytes())  # bf16 -> fp32 is exact
        run["memories"].append(digest.hexdigest())
        run["clues"].append(answer.raw_clues)
        del rag, answer
        release_memory()  # glibc's free pages go back, so what stays is what something holds
        run["resident"].append(resident_mb())
        print(CORPUS_DONE, flush=True)
    return run


def kernel_events(log: str) -> list[list[tuple[str, bool]]]:
    """oneDNN's kernel requests in `log`, split by corpus: (kernel description, was a cache hit)."""
    corpora: list[list[tuple[str, bool]]] = [[]]
    for line in log.splitlines():
        if line.startswith(CORPUS_DONE):
            corpora.append([])
        elif match := KERNEL_EVENT.match(line):
            corpora[-1].append((match.group(2), match.group(1) == "hit"))
    return corpora[:-1]


def kernel_counts(corpora: list[list[tuple[str, bool]]]) -> dict[str, list[int]]:
    """After each corpus: the distinct kernels met so far, and how many misses were for a kernel made
    earlier in the run (compiled again because the cache had evicted it)."""
    made: set[str] = set()
    counts: dict[str, list[int]] = {"met": [], "compiled_again": []}
    again = 0
    for events in corpora:
        for kernel, hit in events:
            if not hit:
                again += kernel in made
                made.add(kernel)
        counts["met"].append(len(made))
        counts["compiled_again"].append(again)
    return counts


def _run_loop(environment: dict[str, str]) -> dict:
    code = f"import json; from tests.test_kernel_caches import resident_memory_loop; " \
           f"print(json.dumps(resident_memory_loop({CORPORA})))"
    env = {key: value for key, value in os.environ.items() if key not in KERNEL_CACHE_VARIABLES}
    env.update({"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "ONEDNN_VERBOSE": "profile_create",
                **environment})
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    run["kernels"] = kernel_counts(kernel_events(done.stdout))
    return run


def _second_half_slope(resident: list[float]) -> float:
    return slope_per_step(resident, skip=len(resident) // 2)


def _skip_where_no_kernel_is_logged(run: dict) -> None:
    if not run["kernels"]["met"] or run["kernels"]["met"][-1] == 0:
        pytest.skip("measured: bf16 products compiled no oneDNN kernel on this CPU (ONEDNN_VERBOSE logged "
                    "none; an AVX2-only CPU runs them outside oneDNN), so there is no kernel cache to bound")


@pytest.fixture(scope="module")
def bounded_run() -> dict:
    return _run_loop({})  # the kernel caches as `import memorag` bounds them


@pytest.fixture(scope="module")
def unbounded_run() -> dict:
    return _run_loop({variable: LIBRARY_CAPACITY for variable in KERNEL_CACHE_VARIABLES})


def test_the_bound_makes_the_caches_evict(bounded_run):
    """The guard: with the bound, the loop meets more kernels than the caches keep, so some are
    compiled again. Without it (`import memorag` not bounding), none is, and this fails."""
    _skip_where_no_kernel_is_logged(bounded_run)
    kernels = bounded_run["kernels"]
    assert kernels["met"][-1] > KERNEL_CACHE_CAPACITY, (
        f"the loop met only {kernels['met'][-1]} kernels, not more than the bound ({KERNEL_CACHE_CAPACITY}): "
        f"it cannot show the bound acting; give it more corpora")
    assert kernels["compiled_again"][-1] > 0, (
        f"the loop met {kernels['met'][-1]} kernels and compiled none again: the caches kept them all, "
        f"so they are not bounded at {KERNEL_CACHE_CAPACITY}. Does `import memorag` still call "
        f"bound_kernel_caches() before the first kernel (memorag/runtime/kernel_caches.py)?")


def test_unbounded_caches_keep_every_kernel_and_compute_the_same(bounded_run, unbounded_run):
    """With the libraries' own capacities (the code before the bound) the caches keep every kernel met,
    more with each corpus, so the guard above is needed; and both compute the same memories and clues,
    bit for bit: the bound decides only whether a kernel is compiled again."""
    assert all(bounded_run["clues"]), "the memory model wrote no clues: nothing to compare"
    assert unbounded_run["memories"] == bounded_run["memories"]
    assert unbounded_run["clues"] == bounded_run["clues"]
    _skip_where_no_kernel_is_logged(unbounded_run)
    kernels = unbounded_run["kernels"]
    assert kernels["compiled_again"][-1] == 0, (
        f"with capacity {LIBRARY_CAPACITY}, {kernels['compiled_again'][-1]} kernels were compiled again: "
        f"the environment did not reach the libraries")
    held = kernels["met"]
    assert held[-1] > KERNEL_CACHE_CAPACITY and held[-1] > held[len(held) // 2], (
        f"unbounded, the caches held {held} kernels after each corpus: they no longer grow past the bound "
        f"({KERNEL_CACHE_CAPACITY}) corpus after corpus, so the loop no longer shows what the bound guards")


@pytest.mark.slow
@pytest.mark.skipif(not can_trim(), reason="needs glibc's malloc_trim: other allocators keep freed pages")
def test_resident_memory_stays_flat_over_many_corpora(bounded_run):
    """What the user sees: bounded, the loop's resident memory stays flat (an upper bound that holds on
    every kind; how much an unbounded cache costs differs by kind, see the module docstring)."""
    resident = bounded_run["resident"]
    slope = _second_half_slope(resident)
    assert slope < BOUND_MB_PER_CORPUS, (
        f"resident memory grew {slope:.2f} MB per corpus over the second half (bound {BOUND_MB_PER_CORPUS}); "
        f"RSS after each corpus: {[round(value) for value in resident]}. Are the kernel caches bounded "
        f"(memorag/runtime/kernel_caches.py)?")


def test_kernel_events_are_read_from_onednn_lines():
    log = "\n".join([
        "onednn_verbose,v1,info,cpu,isa:Intel AVX-512",
        "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,gemm:jit:bf16,undef,src,,5x576:576x1536,8.2",
        "onednn_verbose,v1,primitive,exec,cpu,matmul,gemm:jit:bf16,undef,src,,5x576:576x1536,0.7",
        CORPUS_DONE,
        "onednn_verbose,v1,primitive,create:cache_hit,cpu,matmul,gemm:jit:bf16,undef,src,,5x576:576x1536,0.1",
        "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,gemm:jit:bf16,undef,src,,7x576:576x1536,0.3",
        "onednn_verbose,v1,primitive,create_nested:cache_miss,cpu,reorder,jit:uni,undef,src,,7x576,0.1",
        CORPUS_DONE,
        "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,gemm:jit:bf16,undef,src,,5x576:576x1536,0.9",
        CORPUS_DONE,
    ])
    corpora = kernel_events(log)
    assert [len(events) for events in corpora] == [1, 3, 1]
    assert corpora[1][0] == ("cpu,matmul,gemm:jit:bf16,undef,src,,5x576:576x1536", True)
    assert kernel_counts(corpora) == {"met": [1, 3, 3], "compiled_again": [0, 0, 1]}


def test_bound_kernel_caches_keeps_what_the_environment_says(monkeypatch):
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "1024")
    monkeypatch.delenv("LRU_CACHE_CAPACITY", raising=False)
    assert bound_kernel_caches(32) == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "1024", "LRU_CACHE_CAPACITY": "32"}


def test_importing_memorag_bounds_the_caches():
    env = {key: value for key, value in os.environ.items() if key not in KERNEL_CACHE_VARIABLES}
    code = "import os, memorag; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'], os.environ['LRU_CACHE_CAPACITY'])"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(KERNEL_CACHE_CAPACITY)] * 2


def test_a_capacity_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        bound_kernel_caches(0)
