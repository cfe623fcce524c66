"""The frozen base in a compact exact form a device without `gguf` can rebuild.

The embedded SmolLM2 is a GGUF of Q4_1, Q8_0 and F32 tensors (98 MB); the bf16 folder
the project trains on is its dequantization (`memorag.runtime.embedded.convert_gguf_to_hf`).
`pack_base` keeps the quantized blocks as they are (the compact form), already renamed
to the Hugging Face names and with the query/key rows in Hugging Face's order (a row
permutation moves whole blocks), in one safetensors file of bytes beside the folder's
config and tokenizer files. `restore_base` dequantizes them with torch alone (the same
float32 arithmetic as the GGUF reader, then bf16) and writes the bf16 folder.

Exactness is checked, not assumed: `pack_base` restores what it wrote and refuses unless
every tensor equals the bf16 folder's bit for bit, and records the sha256 of the state
(`state_sha256`) that `restore_base` checks again on the device.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

QUANT_FILE = "base_quantized.safetensors"
MANIFEST = "base_pack.json"
WEIGHTS = "model.safetensors"
BLOCK = 32
_BLOCK_BYTES = {"Q4_1": 20, "Q8_0": 34}  # fp16 scale (and fp16 min) + 32 weights in 4 or 8 bits

# GGUF names of a Llama-family decoder -> Hugging Face names ({} is the layer index).
_LLAMA_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{}.attn_norm.weight": "model.layers.{}.input_layernorm.weight",
    "blk.{}.ffn_norm.weight": "model.layers.{}.post_attention_layernorm.weight",
    "blk.{}.attn_q.weight": "model.layers.{}.self_attn.q_proj.weight",
    "blk.{}.attn_k.weight": "model.layers.{}.self_attn.k_proj.weight",
    "blk.{}.attn_v.weight": "model.layers.{}.self_attn.v_proj.weight",
    "blk.{}.attn_output.weight": "model.layers.{}.self_attn.o_proj.weight",
    "blk.{}.ffn_gate.weight": "model.layers.{}.mlp.gate_proj.weight",
    "blk.{}.ffn_up.weight": "model.layers.{}.mlp.up_proj.weight",
    "blk.{}.ffn_down.weight": "model.layers.{}.mlp.down_proj.weight",
}


def hf_name(gguf_name: str) -> str:
    parts = gguf_name.split(".")
    if parts[0] == "blk":
        return _LLAMA_NAMES[".".join(["blk", "{}", *parts[2:]])].format(parts[1])
    return _LLAMA_NAMES[gguf_name]


def unpermute_rows(rows: torch.Tensor, heads: int) -> torch.Tensor:
    """Hugging Face's row order of a query/key weight stored in GGUF's rotary order ([R, ...] -> [R, ...])."""
    half = rows.shape[0] // heads // 2
    return rows.reshape(heads, half, 2, *rows.shape[1:]).transpose(1, 2).reshape(rows.shape)


def dequantize(kind: str, data: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Float32 weights of `shape` from GGUF blocks `data` (uint8 [rows, row_bytes]) or float32 values."""
    if kind == "F32":
        return data.reshape(shape)
    blocks = data.reshape(-1, _BLOCK_BYTES[kind])  # [N, block_bytes]
    scale = blocks[:, 0:2].contiguous().view(torch.float16).float()  # [N, 1]
    if kind == "Q4_1":
        low = blocks[:, 2:4].contiguous().view(torch.float16).float()
        nibbles = blocks[:, 4:]  # [N, 16]: weights 0-15 in the low nibbles, 16-31 in the high ones
        codes = torch.cat([nibbles & 0xF, nibbles >> 4], dim=1).float()  # [N, 32]
        return (scale * codes + low).reshape(shape)
    codes = blocks[:, 2:].contiguous().view(torch.int8).float()  # Q8_0: [N, 32]
    return (scale * codes).reshape(shape)


def state_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """A hash of names, dtypes, shapes and bytes of every tensor, in name order."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.view(torch.uint8).reshape(-1).numpy().tobytes())
    return digest.hexdigest()


def _gguf_tensors(gguf_path: Path, heads: int, kv_heads: int) -> Iterable[tuple[str, str, torch.Tensor, list[int]]]:
    """(HF name, kind, stored data, HF shape) of every GGUF tensor, rows in HF order (needs `gguf`: pack side only)."""
    import gguf
    import numpy

    for tensor in gguf.GGUFReader(gguf_path).tensors:
        kind = tensor.tensor_type.name
        if kind not in ("F32", *_BLOCK_BYTES):
            raise ValueError(f"{tensor.name}: GGUF type {kind} is not packed (Q4_1, Q8_0 and F32 are)")
        shape = [int(n) for n in reversed(tensor.shape)]
        name = hf_name(tensor.name)
        data = torch.from_numpy(numpy.array(tensor.data)).reshape(shape[0], -1)  # [rows, row bytes or values]
        if ".attn_q." in tensor.name or ".attn_k." in tensor.name:
            data = unpermute_rows(data, heads if ".attn_q." in tensor.name else kv_heads)
        yield name, kind, data.contiguous(), shape


def restore_state(pack_dir: str | Path) -> dict[str, torch.Tensor]:
    """The bf16 state of a pack (torch only)."""
    from safetensors.torch import load_file

    pack_dir = Path(pack_dir)
    manifest = json.loads((pack_dir / MANIFEST).read_text(encoding="utf-8"))
    stored = load_file(pack_dir / QUANT_FILE)
    return {name: dequantize(entry["kind"], stored[name], tuple(entry["shape"])).to(torch.bfloat16)
            for name, entry in manifest["tensors"].items()}


def pack_base(gguf_path: str | Path, hf_folder: str | Path, out_dir: str | Path) -> Path:
    """Write the compact form of `gguf_path` into `out_dir`, checked bit for bit against `hf_folder`."""
    from safetensors.torch import load_file, save_file

    hf_folder, out_dir = Path(hf_folder), Path(out_dir)
    config = json.loads((hf_folder / "config.json").read_text(encoding="utf-8"))
    heads, kv_heads = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    out_dir.mkdir(parents=True, exist_ok=True)
    stored, entries = {}, {}
    for name, kind, data, shape in _gguf_tensors(Path(gguf_path), heads, kv_heads):
        stored[name], entries[name] = data, {"kind": kind, "shape": shape}
    save_file(stored, out_dir / QUANT_FILE)
    small = [p.name for p in sorted(hf_folder.iterdir()) if p.is_file() and not p.name.endswith(".safetensors")]
    for file in small:
        shutil.copyfile(hf_folder / file, out_dir / file)
    reference = load_file(hf_folder / WEIGHTS)
    expected = state_sha256(reference)
    manifest = {"tensors": entries, "files": small, "state_sha256": expected}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    restored = restore_state(out_dir)
    differing = [n for n in reference if n not in restored or not torch.equal(restored[n], reference[n])]
    if differing or set(restored) != set(reference) or state_sha256(restored) != expected:
        raise ValueError(f"the packed base does not restore {hf_folder} exactly: {differing[:5] or 'tensor names'}")
    return out_dir


def restore_base(pack_dir: str | Path, out_dir: str | Path) -> Path:
    """Rebuild the bf16 Hugging Face folder from a pack, refusing a state whose sha256 differs from the pack's."""
    from safetensors.torch import save_file

    pack_dir, out_dir = Path(pack_dir), Path(out_dir)
    manifest = json.loads((pack_dir / MANIFEST).read_text(encoding="utf-8"))
    state = restore_state(pack_dir)
    actual = state_sha256(state)
    if actual != manifest["state_sha256"]:
        raise ValueError(f"the restored base's sha256 {actual} differs from the pack's {manifest['state_sha256']}")
    out_dir.mkdir(parents=True, exist_ok=True)
    for file in manifest["files"]:
        shutil.copyfile(pack_dir / file, out_dir / file)
    save_file(state, out_dir / WEIGHTS, metadata={"format": "pt"})
    return out_dir
