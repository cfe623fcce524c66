"""A window's layers compiled one by one, for memorizing and training (docs/memory-model.md,
"Compiled windows").

A window step runs each decoder layer over a few thousand rows, and in eager mode each layer is
about fifty kernels of which only the matrix products and attention do real work: the two RMS
norms (eight elementwise kernels each), the rotary embedding of queries and keys (five each), the
split of raw and memory rows and their merge, the MLP's activation and product, the residual
adds. On a GPU those small kernels took about a fifth of a 7B memorize's kernel time and over a third
of a 7B training step's (benchmarks/results/profile-h200-2026-11-26/). `CompiledLayers` runs every layer through
`torch.compile`, so the compiler fuses them into a few kernels, forward and backward.

The attention over the cache stays eager: its cache write and its key count change from window
to window (the memory grows), which would recompile a graph at every window. The call into it,
`attend_eager` (memory/attention.py), is therefore left out of compilation (`torch.compiler.disable`),
and each layer compiles as a few graphs around that one break (before attention and after it; the
decoder layer's own frame and the attention module's are cut there both). All layers are instances of
one class with weights of one shape, so the graphs are compiled once and shared by every layer (the
compiler's guards check shapes and dtypes, not which layer: `attend_eager` reads the layer's index);
a new number of rows per step (a window's last, shorter piece) compiles one more set.
Decoding steps (`BufferStep`) never go through here: they have their own compiled form
(`CompiledDecoding`, memory/buffer_step.py).

Results equal the eager layers' up to the compiler's fusion of floating-point operations (in
bf16 it rounds fewer intermediate values), so compiling windows is opt-in, like compiled decoding.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn


class CompiledLayers:
    """The decoder layers, each wrapped by `torch.compile` (the layers themselves are not changed, so
    their weights, names and state dict stay the model's). `mode`, `backend` and `dynamic` are
    `torch.compile`'s. A compile error is raised at the first window; past torch's recompile limit (many
    distinct row counts, e.g. sequences of many lengths) a layer runs eager again, with torch's warning."""

    def __init__(self, layers: nn.ModuleList, mode: str | None = None, backend: str = "inductor",
                 dynamic: bool | None = None) -> None:
        if mode in ("reduce-overhead", "max-autotune"):
            raise ValueError(f"mode={mode!r}: a window step's graphs cannot replay as CUDA graphs (its attention "
                             "runs between them, eager); use the default mode or 'max-autotune-no-cudagraphs'")
        self.mode = mode
        self.backend = backend
        self._layers = [torch.compile(layer, mode=mode, backend=backend, dynamic=dynamic) for layer in layers]

    def __iter__(self) -> Iterator[nn.Module]:
        return iter(self._layers)

    def __len__(self) -> int:
        return len(self._layers)
