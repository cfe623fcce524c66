"""Where models run and in what precision: device, dtype, 4-/8-bit loading, CPU threads.

The pipeline's settings `device`, `dtype`, `quantize` and `threads` are turned into
loading arguments here, and only here, so the memory model, the generator and the
embedder always follow the same settings:

- `device`: "auto" (a CUDA GPU when torch sees one, else the CPU), "cpu", "cuda",
  "cuda:N" or "mps". A causal LM is placed whole on that device (transformers'
  `device_map={"": device}`); the embedder is put there too.
- `dtype`: "auto" (the checkpoint's own for causal LMs, except on a CPU without native
  instructions for it, where a bf16/fp16 model that fits computes in float32:
  memorag/runtime/cpu_dtype.py; float32 for the embedder), "float32", "bfloat16" or "float16"
  (short names fp32, bf16, fp16 are accepted).
- `quantize`: None, "4bit" (NF4 with double quantization) or "8bit" (LLM.int8), through
  bitsandbytes, for the causal LMs only (the embedder is small and stays unquantized).
  bitsandbytes needs a CUDA GPU: on a machine without one this fails with an error that
  says so, before anything is loaded.
- `threads`: torch's (and faiss's) CPU thread count for the whole process; None leaves
  their own (which follow `OMP_NUM_THREADS`).

Names are checked without importing torch (`normalize_*`, used by `PipelineConfig`);
what this machine can do is checked when a model is about to load (`Placement.resolve`).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
from dataclasses import dataclass
from typing import Any

from memorag.config import ConfigError

DTYPE_NAMES: dict[str, str] = {
    "auto": "auto",
    "float32": "float32", "fp32": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
}
QUANTIZE_NAMES: tuple[str, ...] = ("4bit", "8bit")
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
QUANT_INSTALL = "pip install 'bitsandbytes>=0.46.1' 'accelerate>=1.1' (the package's [quant] extra)"


class PlacementError(ConfigError):
    """A device, dtype or quantization this machine cannot give (the message says what to do)."""


def normalize_device(device: str) -> str:
    text = str(device).strip().lower()
    if not _DEVICE.match(text):
        raise ConfigError(f"device={device!r}; use auto (CUDA when present, else CPU), cpu, cuda, cuda:N or mps")
    return text


def normalize_dtype(dtype: Any) -> str:
    """The canonical name of `dtype` (a name or a torch dtype): auto, float32, bfloat16 or float16."""
    text = str(dtype).strip().lower().removeprefix("torch.")
    if text not in DTYPE_NAMES:
        raise ConfigError(f"dtype={dtype!r}; use auto (the checkpoint's own), float32, bfloat16 or float16")
    return DTYPE_NAMES[text]


def normalize_quantize(quantize: Any) -> str | None:
    if quantize is None or str(quantize).strip().lower() in ("", "none", "null", "false"):
        return None
    text = str(quantize).strip().lower().replace("-", "")
    if text in ("4", "8"):
        text += "bit"
    if text not in QUANTIZE_NAMES:
        raise ConfigError(f"quantize={quantize!r}; use 4bit, 8bit, or none")
    return text


def check_threads(threads: int | None) -> int | None:
    if threads is not None and threads < 1:
        raise ConfigError(f"threads={threads} must be at least 1 (or unset: the process's default)")
    return threads


def set_threads(threads: int | None) -> None:
    """Use `threads` CPU threads in torch and faiss from now on (None: leave them as they are)."""
    if threads is None:
        return
    import torch

    check_threads(threads)
    torch.set_num_threads(threads)
    if importlib.util.find_spec("faiss") is not None:
        import faiss

        faiss.omp_set_num_threads(threads)


def quantize_flag(quantize: str) -> str:
    return f"--load-in-{quantize}"


def _resolve_device(device: str) -> str:
    import torch

    device = normalize_device(device)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            build = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
            raise PlacementError(
                f"device={device!r} but torch sees no CUDA GPU here (torch {torch.__version__} is {build}); "
                "use --device cpu (or auto), or run on a machine with a CUDA GPU and a CUDA build of torch"
            )
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise PlacementError(f"device={device!r} but this machine has {torch.cuda.device_count()} CUDA GPU(s); "
                                 f"use cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if device == "mps" and not torch.backends.mps.is_available():
        raise PlacementError("device='mps' but this torch sees no Apple GPU; use --device cpu (or auto)")
    return device


def _torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def _quantization_config(quantize: str, device: str, dtype: str):
    """bitsandbytes settings for transformers; refused before any loading where they cannot work."""
    import torch

    flag = quantize_flag(quantize)
    if not device.startswith("cuda"):
        where = "this machine has no CUDA GPU" if not torch.cuda.is_available() else f"device={device!r}"
        raise PlacementError(
            f"{flag} needs a CUDA GPU and bitsandbytes: {QUANT_INSTALL}, on a machine with a CUDA GPU and a "
            f"CUDA build of torch ({where}); drop {flag} to load the model unquantized"
        )
    missing = [name for name in ("bitsandbytes", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        raise PlacementError(f"{flag} needs a CUDA GPU and bitsandbytes: {' and '.join(missing)} "
                             f"not installed; {QUANT_INSTALL}")
    from transformers import BitsAndBytesConfig

    if quantize == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    if dtype == "auto":
        compute = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    else:
        compute = _torch_dtype(dtype)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute)


@dataclass(frozen=True)
class Placement:
    """Checked settings for this machine: `device` is resolved ("auto" is gone), `dtype` is a
    canonical name; build one with `Placement.resolve`."""

    device: str
    dtype: str = "auto"
    quantize: str | None = None

    @classmethod
    def resolve(cls, device: str = "auto", dtype: Any = "auto", quantize: str | None = None) -> Placement:
        """Check the settings against this machine: a CUDA device without a GPU, or 4-/8-bit loading
        without a CUDA GPU and bitsandbytes, is refused here, before anything loads."""
        placement = cls(_resolve_device(device), normalize_dtype(dtype), normalize_quantize(quantize))
        placement.lm_kwargs()  # quantization's requirements fail now, not halfway through a load
        return placement

    @classmethod
    def of(cls, config: Any) -> Placement:
        """The placement a `PipelineConfig` (anything with device, dtype, quantize) asks for."""
        return cls.resolve(config.device, config.dtype, config.quantize)

    def lm_kwargs(self) -> dict[str, Any]:
        """`from_pretrained` keywords for a causal LM (the memory model's base or the generator)."""
        kwargs: dict[str, Any] = {"dtype": "auto" if self.dtype == "auto" else _torch_dtype(self.dtype)}
        if self.quantize is not None:
            kwargs["quantization_config"] = _quantization_config(self.quantize, self.device, self.dtype)
        if self.device != "cpu" or self.quantize is not None:
            kwargs["device_map"] = {"": self.device}  # the whole model on one device
        return kwargs

    def embedder_kwargs(self) -> dict[str, Any]:
        """`SentenceTransformer` keywords: the device, and the dtype unless it is "auto" (float32)."""
        kwargs: dict[str, Any] = {"device": self.device}
        if self.dtype != "auto":
            kwargs["model_kwargs"] = {"dtype": _torch_dtype(self.dtype)}
        return kwargs

    def describe(self) -> str:
        return f"{self.device}, {self.dtype}" + (f", {self.quantize}" if self.quantize else "")


def add_placement_arguments(parser: argparse.ArgumentParser) -> None:
    """`--device`, `--dtype`, `--load-in-4bit`, `--load-in-8bit`, `--threads`, `--compile-decoding` and
    `--compile-windows` (the command line of every script that loads models; `placement_settings` turns them
    into settings)."""
    group = parser.add_argument_group("device and precision (default: CUDA when present, else CPU)")
    group.add_argument("--device", metavar="DEVICE",
                       help="auto (CUDA when present, else CPU), cpu, cuda, cuda:N or mps; the memory model, a local "
                            "generator and the embedder all load there")
    group.add_argument("--dtype", metavar="DTYPE",
                       help="auto (the checkpoint's own, but float32 on a CPU without native bf16/fp16 instructions; "
                            "float32 for the embedder), float32, bfloat16 or float16")
    bits = group.add_mutually_exclusive_group()
    bits.add_argument("--load-in-4bit", action="store_true",
                      help="load the memory model and a local generator in 4 bits (NF4; needs a CUDA GPU and "
                           "bitsandbytes: the [quant] extra)")
    bits.add_argument("--load-in-8bit", action="store_true",
                      help="load them in 8 bits (LLM.int8; needs a CUDA GPU and bitsandbytes)")
    group.add_argument("--threads", type=int, metavar="N",
                       help="CPU threads for torch and faiss (default: their own, which follow OMP_NUM_THREADS)")
    group.add_argument("--compile-decoding", nargs="?", const="default", metavar="MODE",
                       choices=["default", "reduce-overhead", "max-autotune"],
                       help="compile the memory model's decoding step whole with torch.compile (MODE: default, or "
                            "reduce-overhead for CUDA graphs on a GPU); compiling takes seconds on a GPU, minutes "
                            "on a small CPU, once per process")
    group.add_argument("--compile-windows", nargs="?", const="default", metavar="MODE",
                       choices=["default", "max-autotune-no-cudagraphs"],
                       help="memorize through the memory model's layers compiled one by one with torch.compile "
                            "(faster on a GPU after seconds of compiling, once per process)")


def placement_settings(args: argparse.Namespace) -> dict[str, str | int]:
    """The settings the placement arguments ask for, as typed values (only those given)."""
    settings: dict[str, str | int] = {key: value for key, value in (
        ("device", args.device), ("dtype", args.dtype), ("threads", args.threads),
        ("compile_decoding", getattr(args, "compile_decoding", None)),
        ("compile_windows", getattr(args, "compile_windows", None))) if value is not None}
    if args.load_in_4bit:
        settings["quantize"] = "4bit"
    if args.load_in_8bit:
        settings["quantize"] = "8bit"
    return settings


def placement_overrides(args: argparse.Namespace) -> list[str]:
    """`placement_settings` as `key=value` overrides, for scripts that take settings as text."""
    return [f"{key}={value}" for key, value in placement_settings(args).items()]
