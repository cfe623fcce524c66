"""The memory model's outputs on fixed cases, recorded to hold a refactor bit for bit (tests/memory/test_goldens.py).

Each case builds a tiny random decoder (conftest.py), memorizes fixed ids and decodes fixed
prompts: three attention schemes, two ratios, one prompt, an exact packed batch, a batch with
shared products, a batch of memories, the training loss, a bf16 model, and the compiled decoding
step and compiled windows (Dynamo's `eager` backend, which runs on every CPU).

A case's outputs are its memories' tensors, its replies' ids and its loss. Run as a script to
record them for this machine (`python -m tests.memory.goldens --record`): the tensors go to
data/goldens.safetensors (compared within a tolerance on every machine), their sha256 and the
replies to data/goldens.json under this machine's kind (compared bit for bit on a machine of
that kind: a matrix product's last bits depend on the CPU's kernels).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
from collections.abc import Callable
from pathlib import Path

import torch

DATA = Path(__file__).parent / "data"
RECORD = DATA / "goldens.json"
TENSORS = DATA / "goldens.safetensors"

MEMORIZED = 70  # four whole windows of 16 and six tokens of a fifth
PROMPTS = ([5, 6, 7, 8, 9], [10, 11, 12], [13, 14, 15, 16, 17, 18, 19])
NEW_TOKENS = 12


def machine_kind() -> str:
    """The CPU's kind as its kernels see it: torch's vector capability and the bf16 / AMX flags."""
    flags = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    extra = sorted(flag for flag in flags if flag in {"avx512_bf16", "amx_bf16", "amx_tile"})
    return "-".join([platform.machine(), torch.backends.cpu.get_cpu_capability(), *extra,
                     f"torch{torch.__version__.split('+')[0]}"])


def _model(scheme: str = "full-coverage", ratio: int = 4, dtype: torch.dtype = torch.float32, family: str = "llama"):
    from .conftest import tiny_memory_model

    return tiny_memory_model(family, attention=scheme, ratios=[ratio]).to(dtype).eval()


def _ids(length: int, seed: int) -> list[int]:
    from .conftest import random_ids

    return random_ids(length, seed=seed)[0].tolist()


def _memory_tensors(name: str, memory) -> dict[str, torch.Tensor]:
    return {f"{name}.{kind}.{layer}": tensor.contiguous() for kind, tensors in (("keys", memory.keys),
            ("values", memory.values)) for layer, tensor in enumerate(tensors)}


def _alone(scheme: str, ratio: int, dtype: torch.dtype = torch.float32, family: str = "llama"):
    def run():
        model = _model(scheme, ratio, dtype, family)
        memory = model.memorize(_ids(MEMORIZED, 1))
        replies = [model.generate_ids(prompt, memory=memory, max_new_tokens=NEW_TOKENS) for prompt in PROMPTS[:2]]
        fresh = model.generate_ids(PROMPTS[2], max_new_tokens=NEW_TOKENS)  # no memory: the prompt alone
        return _memory_tensors("memory", memory), [*replies, fresh]
    return run


def _batch(exact: bool):
    def run():
        model = _model()
        memory = model.memorize(_ids(MEMORIZED, 1))
        return {}, model.generate_ids_batch(list(PROMPTS), memory=memory, max_new_tokens=NEW_TOKENS, exact=exact)
    return run


def _memorize_batch():
    model = _model("step-expansion", 2)
    memories = model.memorize_batch([_ids(MEMORIZED, 1), _ids(37, 2), _ids(16, 3)])
    tensors = {}
    for index, memory in enumerate(memories):
        tensors.update(_memory_tensors(f"memory{index}", memory))
    return tensors, []


def _loss():
    model = _model("segmentation", 2)
    ids = torch.tensor([_ids(MEMORIZED, 4)])
    with torch.no_grad():
        loss = model(ids, labels=ids).loss
    model.train().gradient_checkpointing = True
    trained = model(ids, labels=ids).loss
    trained.backward()
    grad = model.memory_embedding.grad
    return {"loss": loss.reshape(1), "trained_loss": trained.detach().reshape(1), "embedding_grad": grad.clone()}, []


def _compiled_decoding():
    model = _model()
    model.compile_decoding(backend="eager")
    memory = model.memorize(_ids(MEMORIZED, 1))
    return {}, [model.generate_ids(prompt, memory=memory, max_new_tokens=NEW_TOKENS) for prompt in PROMPTS]


def _compiled_windows():
    model = _model("step-expansion")
    model.compile_windows(backend="eager")
    return _memory_tensors("memory", model.memorize(_ids(MEMORIZED, 1))), []


CASES: dict[str, Callable[[], tuple[dict[str, torch.Tensor], list[list[int]]]]] = {
    "full-coverage-r4": _alone("full-coverage", 4),
    "step-expansion-r4": _alone("step-expansion", 4),
    "segmentation-r2": _alone("segmentation", 2),
    "full-coverage-r2-qwen3": _alone("full-coverage", 2, family="qwen3"),
    "bf16-full-coverage-r4": _alone("full-coverage", 4, torch.bfloat16),
    "exact-batch": _batch(True),
    "shared-products-batch": _batch(False),
    "memorize-batch": _memorize_batch,
    "training-loss": _loss,
    "compiled-decoding": _compiled_decoding,
    "compiled-windows": _compiled_windows,
}


def sha256(tensor: torch.Tensor) -> str:
    data = tensor.detach().to("cpu").contiguous()
    return hashlib.sha256(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"").hexdigest()


def run_case(name: str) -> tuple[dict[str, torch.Tensor], list[list[int]]]:
    torch._dynamo.reset()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        tensors, replies = CASES[name]()
    return {f"{name}/{key}": value for key, value in tensors.items()}, replies


def record() -> None:
    from safetensors.torch import load_file, save_file

    kind = machine_kind()
    document = json.loads(RECORD.read_text()) if RECORD.is_file() else {"replies": {}, "sha256": {}, "kind_replies": {}}
    stored = load_file(str(TENSORS)) if TENSORS.is_file() else {}
    hashes, kind_replies = {}, {}
    for name in CASES:
        tensors, replies = run_case(name)
        document["replies"].setdefault(name, replies)  # the first machine's: fp32 replies hold on every machine
        kind_replies[name] = replies
        hashes.update({key: sha256(value) for key, value in tensors.items()})
        for key, value in tensors.items():
            stored.setdefault(key, value.to(torch.float32))  # the first machine's values, the tolerance's reference
        print(name, "replies", [len(reply) for reply in replies], "tensors", len(tensors))
    document["sha256"][kind] = hashes
    document["kind_replies"][kind] = kind_replies
    DATA.mkdir(exist_ok=True)
    save_file(stored, str(TENSORS))
    RECORD.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(hashes)} tensors' sha256 for {kind}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true", help="record this machine's outputs into tests/memory/data")
    if parser.parse_args().record:
        record()
