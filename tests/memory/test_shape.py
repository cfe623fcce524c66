"""The memory package keeps a shape a newcomer can read in one sitting (docs/contributors/design.md).

At most 20 files, none over 450 lines, no function over 60; a short decode from a memory runs code
in at most 7 of the files, each decoded token in at most 5; and the docs' module map names every file,
once, in reading order.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import torch

from memorag.runtime.decode_loop import DecodeBatch

from .conftest import random_ids, tiny_memory_model

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memorag" / "memory"
DOCS = ROOT / "docs" / "contributors" / "design.md"

MAX_FILES, MAX_LINES, MAX_FUNCTION_LINES, MAX_DECODE_FILES, MAX_TOKEN_FILES = 20, 450, 60, 7, 5


def package_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def long_functions(path: Path, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of every function or method of `path` longer than `limit` lines (decorators excluded)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append((node.name, lines))
    return found


def test_few_short_files():
    files = package_files()
    assert 10 <= len(files) <= MAX_FILES, [path.name for path in files]
    long = {path.name: n for path in files if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_no_long_function():
    long = {path.name: found for path in package_files() if (found := long_functions(path, MAX_FUNCTION_LINES))}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_function_check_finds_a_long_one(tmp_path):
    path = tmp_path / "long.py"
    path.write_text("def short():\n    return 1\n\n\ndef long():\n" + "    x = 1\n" * 61 + "    return x\n")
    assert long_functions(path, 60) == [("long", 63)]


def files_run_by(call) -> set[str]:
    """The files of the memory package whose code runs while `call()` runs (any function entered there)."""
    seen: set[str] = set()
    prefix = str(PACKAGE) + "/"

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(prefix):
            seen.add(frame.f_code.co_filename[len(prefix):])

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def files_run_by_each_step(call) -> list[set[str]]:
    """Per call of the decode loop's `DecodeBatch.step` while `call()` runs (one decoded token of each running
    sequence), the files of the memory package whose code ran inside it."""
    steps: list[set[str]] = []
    depth = 0
    prefix = str(PACKAGE) + "/"
    step_code = DecodeBatch.step.__code__

    def profile(frame, event, arg):
        nonlocal depth
        if frame.f_code is step_code and event in ("call", "return"):
            depth += 1 if event == "call" else -1
            if event == "call":
                steps.append(set())
        elif event == "call" and depth and frame.f_code.co_filename.startswith(prefix):
            steps[-1].add(frame.f_code.co_filename[len(prefix):])

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return steps


def test_a_short_decode_runs_code_in_few_files():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(40)[0].tolist(), show_progress=False)
    prompt = random_ids(5, seed=1)[0].tolist()
    model.generate_ids(prompt, memory=memory, max_new_tokens=2)  # warm: nothing imported or built lazily below
    with torch.no_grad():
        files = files_run_by(lambda: model.generate_ids(prompt, memory=memory, max_new_tokens=3))
    assert {"model.py", "decoding.py", "core.py", "attention.py", "cache.py"} <= files  # the trace sees the decode
    assert len(files) <= MAX_DECODE_FILES, sorted(files)


def test_each_decoded_token_runs_code_in_few_files():
    """12 tokens over a window of 16 at ratio 4: steps that bring a memory token and one that completes the
    window (compaction) among them."""
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(40)[0].tolist(), show_progress=False)
    prompt = random_ids(5, seed=1)[0].tolist()
    model.generate_ids(prompt, memory=memory, max_new_tokens=2)
    with torch.no_grad():
        steps = files_run_by_each_step(lambda: model.generate_ids(prompt, memory=memory, max_new_tokens=12,
                                                                  min_new_tokens=12))
    decoding = [files for files in steps if "attention.py" in files]  # the last step only ends the reply
    assert len(decoding) == 11, steps
    widest = max(decoding, key=len)
    assert len(widest) <= MAX_TOKEN_FILES, sorted(widest)


def module_map() -> list[str]:
    """The files the docs' module map names, in its order: the first list after the page's title."""
    names, started = [], False
    for line in DOCS.read_text(encoding="utf-8").splitlines()[1:]:
        match = re.match(r"^\d+\. `([a-z_]+\.py)`", line)
        if match:
            names.append(match.group(1))
            started = True
        elif started and not line.startswith("   "):
            break
    return names


def test_the_design_page_opens_with_the_module_map():
    names = module_map()
    assert sorted(names) == sorted(path.name for path in package_files()), "the module map names every file once"
    heading = next(index for index, line in enumerate(DOCS.read_text(encoding="utf-8").splitlines()[1:])
                   if line.startswith("## "))
    first_item = next(index for index, line in enumerate(DOCS.read_text(encoding="utf-8").splitlines()[1:])
                      if re.match(r"^\d+\. `", line))
    assert first_item < heading, "the module map comes before the first section"


def _sources() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in package_files()}


def test_grouped_query_attention_is_decided_in_one_file():
    """Query heads meet key/value heads in attention.py alone: the layer's `kv_groups`, set once when it is
    wrapped and handed to the kernels; nothing compares head counts from tensor shapes."""
    words = ("num_attention_heads", "num_key_value_groups", "enable_gqa", "repeat_interleave")
    where = {word: sorted(name for name, text in _sources().items() if word in text) for word in words}
    assert where == {word: ["attention.py"] for word in words} | {"num_key_value_groups": []}, where
    assignments = [name for name, text in _sources().items() for _ in re.finditer(r"\bself\.kv_groups\b.*=", text)]
    assert assignments == ["attention.py"]
    assert not [name for name, text in _sources().items() if re.search(r"shape\[1\]\s*!=\s*\w+\.shape\[1\]", text)]


COMPILED_DECODING = re.compile(r"\b(?:decoding_compiled|_compiled_decoding)\b")


def _functions_reading(source: str, pattern: re.Pattern[str], skip: tuple[str, ...] = ()) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)
            and node.name not in skip and pattern.search(ast.unparse(node))}


def test_whether_decoding_is_compiled_is_read_where_a_step_runs_and_where_decode_chooses():
    """Whether decoding is compiled is read in two places: where a decoding step over whole buffers runs
    (`MemoryCore.run_decoding`), and in `decode`, which alone chooses how several prompts decode."""
    sources = _sources()
    assert {name for name, text in sources.items() if COMPILED_DECODING.search(text)} == {"core.py", "decoding.py"}
    own = ("__init__", "compile_decoding", "decoding_compiled")
    assert _functions_reading(sources["core.py"], COMPILED_DECODING, own) == {"run_decoding"}
    assert _functions_reading(sources["decoding.py"], COMPILED_DECODING) == {"decode"}
    assert sources["decoding.py"].count("allocate_block(") == 2  # its definition and `_decoding_cache`


def test_one_kernel_registry():
    """Every attention kernel is an entry of `KERNELS` with one signature, and both kinds of step call it."""
    from memorag.memory.attention import KERNELS
    from memorag.memory.cache import ValidRowsStep, WholeBufferStep

    sources = _sources()
    calls = {name for name, text in sources.items() if "scaled_dot_product_attention(" in text or "flash_attn" in text}
    assert calls == {"attention.py"}
    registries = [name for name, text in sources.items() for _ in re.finditer(r"^\w+: dict\[str, Kernel\]", text, re.M)]
    assert registries == ["attention.py"]
    tree = ast.parse(sources["attention.py"])
    kernels = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
               and any(isinstance(call, ast.Call) and "scaled_dot_product_attention" in ast.unparse(call.func)
                       for call in ast.walk(node))}
    assert kernels <= {kernel.__name__ for kernel in KERNELS.values()}, kernels
    for step in (ValidRowsStep, WholeBufferStep):
        assert "KERNELS[self.implementation]" in ast.unparse(ast.parse(_method_source(step.attend)))
    signatures = {tuple(kernel.__code__.co_varnames[: kernel.__code__.co_argcount]) for kernel in KERNELS.values()}
    assert signatures == {("query", "key", "value", "seen", "scale", "groups")}


def _method_source(method) -> str:
    import inspect
    import textwrap

    return textwrap.dedent(inspect.getsource(method))


def test_memory_rows_are_inserted_and_biases_started_in_one_place():
    """One copy each: the memory embedding is expanded into a step's rows by `with_memory_rows` alone, and
    every additive bias starts from `unseen` (the one `-inf` fill)."""
    sources = _sources()
    inserts = [name for name, text in sources.items() for _ in re.finditer(r"memory_embedding\.to\(", text)]
    assert inserts == ["core.py"]
    fills = [name for name, text in sources.items() for _ in re.finditer(r"float\(\"-inf\"\)", text)]
    assert fills == ["schedule.py"]


def test_reference_only_modes_live_in_the_tests():
    """The product caches keys rotated, one way: the cache that re-rotates every key at every read is the
    tests' reference (tests/memory/test_streaming.py), not a flag of the product."""
    assert not [name for name, text in _sources().items() if "rotated_keys" in text or "read_keys" in text]
