"""Resident memory stays flat over many corpora: the kernel caches are bounded (memorag/kernel_caches.py).

The loop is the user's, reduced: one bf16 memory model (576 wide, as the embedded one, but
2 layers over the fake 96-word tokenizer), then memorize, ask (the memory model writes
clues) and drop 10 corpora of different lengths, each in a fresh process so that no earlier
test has filled the caches. Every corpus brings new shapes (its last window, its memory
size, each decoding step's attention), so with the libraries' own capacities (1,024) its
resident memory grows about 16 MB per corpus on a CPU where bf16 matmuls run in oneDNN;
bounded, under 0.1 MB. Both compute the same memories and clues, bit for bit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memorag.kernel_caches import KERNEL_CACHE_CAPACITY, KERNEL_CACHE_VARIABLES, bound_kernel_caches
from memorag.memtrim import can_trim, slope_per_step

ROOT = Path(__file__).resolve().parents[1]
CORPORA = 10
BOUND_MB_PER_CORPUS = 2.0  # bounded: under 0.1 measured; the libraries' own capacities: about 16


def resident_memory_loop(corpora: int) -> dict[str, list]:
    """RSS (MiB) after each of `corpora` memorize-ask-drop steps over one shared bf16 model, and what
    the model computed (a digest of each memory, the clues it wrote); run in a fresh process (`_run_loop`)."""
    import hashlib

    import torch

    from memorag.memory import MemoryConfig, MemoryModel
    from memorag.memtrim import release_memory, resident_mb
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
    return run


def _run_loop(environment: dict[str, str]) -> dict[str, list]:
    code = f"import json; from tests.test_kernel_caches import resident_memory_loop; " \
           f"print(json.dumps(resident_memory_loop({CORPORA})))"
    env = {key: value for key, value in os.environ.items() if key not in KERNEL_CACHE_VARIABLES}
    env.update({"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **environment})
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _second_half_slope(resident: list[float]) -> float:
    return slope_per_step(resident, skip=len(resident) // 2)


def _onednn_runs_bf16() -> bool:
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


@pytest.fixture(scope="module")
def bounded_run() -> dict[str, list]:
    return _run_loop({})  # the kernel caches as `import memorag` bounds them


@pytest.mark.slow
@pytest.mark.skipif(not can_trim(), reason="needs glibc's malloc_trim: other allocators keep freed pages")
def test_resident_memory_stays_flat_over_many_corpora(bounded_run):
    resident = bounded_run["resident"]
    slope = _second_half_slope(resident)
    assert slope < BOUND_MB_PER_CORPUS, (
        f"resident memory grew {slope:.2f} MB per corpus over the second half (bound {BOUND_MB_PER_CORPUS}); "
        f"RSS after each corpus: {[round(value) for value in resident]}. Are the kernel caches bounded "
        f"(memorag/kernel_caches.py)?")


@pytest.mark.skipif(not can_trim(), reason="needs glibc's malloc_trim: other allocators keep freed pages")
def test_unbounded_caches_grow_and_compute_the_same(bounded_run):
    """The same loop with the libraries' own capacities (the code before the bound) must break the
    bound, or the test above could not fail; and it computes the same memories and clues, bit for
    bit: the bound decides only whether a kernel is compiled again."""
    if not _onednn_runs_bf16():
        pytest.skip("bf16 matmuls do not run in oneDNN on this CPU (no AVX-512): no kernel cache to fill")
    unbounded = _run_loop({variable: "1024" for variable in KERNEL_CACHE_VARIABLES})
    assert all(bounded_run["clues"]), "the memory model wrote no clues: nothing to compare"
    assert unbounded["memories"] == bounded_run["memories"]
    assert unbounded["clues"] == bounded_run["clues"]
    resident = unbounded["resident"]
    slope = _second_half_slope(resident)
    assert slope > 2 * BOUND_MB_PER_CORPUS, (
        f"with the libraries' own kernel caches the loop grew only {slope:.2f} MB per corpus "
        f"(RSS {[round(value) for value in resident]}): it no longer shows what the bound guards against")


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
