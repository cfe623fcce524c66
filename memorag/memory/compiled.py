"""The memory model's two compiled forms (docs/memory-model.md, "The compiled decoding step" and
"Compiled windows"); both are opt-in, and their results equal the eager ones' up to the compiler's
fusion of floating-point operations.

**A decoding step, compiled whole** (`CompiledDecoding`). A decoding step's context, `WholeBufferStep`
(memory/attention.py), holds only tensors and constants: the whole key/value buffers, the buffer
rows the step's rows are written to, and the additive bias over the buffers. Nothing in it is a
Python number that changes from token to token, so the layers' forward over it compiles into one
graph for a step of one raw row and one for a step that also brings a memory row, reused token
after token; on CUDA with `mode="reduce-overhead"` each is replayed as a CUDA graph, the buffers
marked as static addresses so that the in-place writes stay in place.

**A window's layers, each through the compiled block** (`CompiledLayers`), for memorizing and training. In
eager mode each layer is about fifty kernels of which only the matrix products and attention do
real work (norms, rotary embedding, the split and merge of raw and memory rows, the MLP's
activation, residual adds); on a GPU those small kernels take a large share of a window's time,
and the compiler fuses them into a few, forward and backward. The attention over the cache stays
eager (its cache write and key count change from window to window: `ValidRowsStep.attend` is
excluded from compilation), so the block compiles as a few graphs around that one break. Every
layer is an argument of the one compiled block, with weights of one shape, so the graphs are
compiled once and shared by every layer; a new number of rows per step (a window's last, shorter
piece) compiles one more set.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .cache import WholeBufferStep

# (hidden [B, T, D], positions [1, T], context) -> hidden [B, T, D]: the layers' forward
RunLayers = Callable[[torch.Tensor, torch.Tensor, WholeBufferStep], torch.Tensor]


class CompiledDecoding:
    """The layers' forward over a `WholeBufferStep`, compiled whole.

    `mode` and `backend` are `torch.compile`'s ("default" and "inductor" unless told; "reduce-overhead"
    on CUDA replays CUDA graphs). The buffers' capacity C is marked dynamic, everything else is static:
    one graph for a step of one raw row and one for a step that also brings a memory row serve every
    capacity (a CUDA graph is still recorded per capacity, as buffers grow by doubling: a few per run).
    """

    def __init__(self, run_layers: RunLayers, mode: str | None = None, backend: str = "inductor") -> None:
        self.mode = mode
        self.backend = backend
        self.uses_cuda_graphs = mode in ("reduce-overhead", "max-autotune")
        self._compiled = torch.compile(run_layers, fullgraph=True, mode=mode, backend=backend)

    def __call__(self, hidden: torch.Tensor, positions: torch.Tensor, context: WholeBufferStep) -> torch.Tensor:
        for buffer in (*context.keys, *context.values):
            torch._dynamo.mark_dynamic(buffer, 2)  # the capacity: one graph for every size the buffers grow to
            if self.uses_cuda_graphs:  # written in place inside a CUDA graph: the address must not change
                torch._dynamo.mark_static_address(buffer)
        torch._dynamo.mark_dynamic(context.seen.bias, context.seen.bias.dim() - 1)
        if not self.uses_cuda_graphs:
            return self._compiled(hidden, positions, context)
        # a CUDA graph's output lives in memory its next replay overwrites: the caller may keep it
        # (read_tokens' keep_hidden), so it leaves as a copy ([B, T, D], a few KB)
        torch.compiler.cudagraph_mark_step_begin()
        return self._compiled(hidden, positions, context).clone()


class CompiledLayers:
    """The decoder block (`attention.decoder_block`) through `torch.compile`, for every layer: the layers
    themselves are not changed, so their weights, names and state dict stay the model's, and as each layer is
    an argument of one compiled function, its graphs are compiled once and shared by every layer. `mode`,
    `backend` and `dynamic` are `torch.compile`'s. A compile error is raised at the first window; past torch's
    recompile limit (many distinct row counts, e.g. sequences of many lengths) the block runs eager again,
    with torch's warning."""

    def __init__(self, block: Callable, mode: str | None = None, backend: str = "inductor",
                 dynamic: bool | None = None) -> None:
        if mode in ("reduce-overhead", "max-autotune"):
            raise ValueError(f"mode={mode!r}: a window step's graphs cannot replay as CUDA graphs (its attention "
                             "runs between them, eager); use the default mode or 'max-autotune-no-cudagraphs'")
        self.mode = mode
        self.backend = backend
        self.block = torch.compile(block, mode=mode, backend=backend, dynamic=dynamic)
