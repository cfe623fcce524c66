"""The memory model's core: a frozen decoder whose attention is patched, and `step`, its one forward.

The base model's decoder layers run unchanged; each attention module is wrapped by a
`MemoryAttention`. `step` reads one piece of a window per input: its raw tokens with a memory
token inserted after every ratio-th of them (memory embedding, memory projections), all rows in
one forward over [memory | current window], then compaction when the piece completes its
window (docs/memory-model.md, "The step"). `read_tokens` and `read_tokens_batch` are loops over
it; the drivers (memorizing, the training objectives, decoding) are loops over those.

The caller says what kind of step it runs, and the kind picks the path:
- `"window"` (memorize, training, scoring, a prompt's prefill): the rows attend over the cache's
  valid rows with the configured kernel (`ValidRowsStep`); compiled per layer after
  `compile_windows`;
- `"decode"` (the token a decoding round reads): one raw token, and the memory token it may
  bring, written in place into a cache grown for it; it attends over the whole buffers, so its
  shapes repeat token after token (`WholeBufferStep`); compiled whole after `compile_decoding`.
Several inputs are one packed batch: their rows share one pass over the layers, each attending
over its own cache as alone (`PackedStepRows`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from memorag.prompting.chat_layout import PromptLayout

from .attention import (
    ExactProducts,
    KeysSeen,
    MemoryAttention,
    SequenceRows,
    apply_rope,
    decoder_block,
    project,
)
from .cache import Allocation, MemoryCache, PackedStepRows, StepRows, ValidRowsStep, WholeBufferStep
from .compiled import CompiledDecoding, CompiledLayers
from .config import MemoryConfig
from .families import family_of
from .schedule import (
    ContextTooLongError,
    RatioOf,
    RawMemoryRows,
    ScheduleState,
    WindowPiece,
    bucket_bias,
    choose_ratio,
    compaction_rows,
    piece_mask,
    plan,
    ratio_function,
    raw_memory_rows,
)
from .state import Memory, WeightsHash, check_identity, identity_of

StepKind = Literal["window", "decode"]


@dataclass(frozen=True)
class StepInput:
    """One piece of one window for one working cache."""

    input_ids: torch.Tensor  # [B, n] the piece's raw tokens, n >= 1
    cache: MemoryCache  # written in place (or functionally under autograd), then advanced to `after`
    piece: WindowPiece  # where the tokens go: ratio, window offset, memory entries before, completes the window
    after: ScheduleState  # the cache's schedule state once the piece is written


def plan_steps(input_ids: torch.Tensor, cache: MemoryCache, window: int, ratio_of: RatioOf) -> list[StepInput]:
    """Raw tokens [B, N] continuing `cache` -> the steps that read them, one per window piece, in order."""
    return [StepInput(input_ids[:, piece.raw_start : piece.raw_end], cache, piece, after)
            for piece, after in plan(cache.state, input_ids.shape[1], window, ratio_of)]


class MemoryCore(nn.Module):
    """A frozen causal LM with memory attention and a memory embedding; the parameters and the step."""

    def __init__(self, base_model: nn.Module, config: MemoryConfig | None = None, tokenizer=None,
                 name: str | None = None):
        super().__init__()
        self.config = config or MemoryConfig()
        self.family = family_of(base_model.config)
        base_model.requires_grad_(False)
        self.base_model = base_model
        self.tokenizer = tokenizer
        self.name = name or getattr(base_model.config, "_name_or_path", "") or base_model.config.model_type
        for layer in self.layers:
            attention = getattr(layer, self.family.attention)
            if isinstance(attention, MemoryAttention):
                raise ValueError("this base model is already patched with memory attention")
            setattr(layer, self.family.attention, MemoryAttention(attention, self.family, self.config.memory_params))
        init_id = special_token_id(tokenizer, base_model, self.config.embed_init)
        embedding = self.embed_tokens.weight[init_id].detach().clone()
        self.memory_embedding = nn.Parameter(embedding, requires_grad=True)  # [D]
        self.exact_products = ExactProducts()  # how an exact batch multiplies its sequences (`project`)
        self.gradient_checkpointing = False
        self.layout = PromptLayout.for_tokenizer(tokenizer)
        self._weights_hash = WeightsHash()
        self._compiled_decoding: CompiledDecoding | None = None
        self._compiled_layers: CompiledLayers | None = None

    # -- parts of the base model ---------------------------------------------------------
    @property
    def layers(self) -> nn.ModuleList:
        return self.base_model.get_submodule(self.family.layers)

    @property
    def embed_tokens(self) -> nn.Embedding:
        return self.base_model.get_submodule(self.family.embed_tokens)

    @property
    def final_norm(self) -> nn.Module:
        return self.base_model.get_submodule(self.family.final_norm)

    @property
    def rotary(self) -> nn.Module:
        return self.base_model.get_submodule(self.family.rotary)

    @property
    def lm_head(self) -> nn.Module:
        return self.base_model.get_submodule(self.family.lm_head)

    @property
    def max_positions(self) -> int:
        return int(self.base_model.config.max_position_embeddings)

    @property
    def device(self) -> torch.device:
        return self.memory_embedding.device

    @property
    def dtype(self) -> torch.dtype:
        return self.memory_embedding.dtype

    @property
    def base_dtype(self) -> torch.dtype:
        """The frozen model's dtype: the cache and every row's keys and values use it."""
        return self.embed_tokens.weight.dtype

    def memory_attentions(self) -> list[MemoryAttention]:
        return [getattr(layer, self.family.attention) for layer in self.layers]

    def memory_parameters(self) -> dict[str, nn.Parameter]:
        """The trainable parameters, by construction: the memory embedding and projections."""
        params = {"embedding": self.memory_embedding}
        for index, attention in enumerate(self.memory_attentions()):
            for name, param in attention.memory.named_parameters():
                params[f"layers.{index}.{name}"] = param
        return params

    def base_state_dict(self) -> dict[str, torch.Tensor]:
        """The frozen base model's weights under its own names (as if it were not patched)."""
        return self._unpatched(self.base_model.state_dict().items())

    def base_tensors(self) -> dict[str, torch.Tensor]:
        """Every parameter (the `nn.Parameter` itself, tied ones under each name) and buffer of the frozen
        base, under the names the unpatched model gives them: what a second model of the base's config
        needs to hold the same weights (memorag/generation/reader_adapter.py)."""
        return self._unpatched([*self.base_model.named_parameters(remove_duplicate=False),
                                *self.base_model.named_buffers(remove_duplicate=False)])

    def _unpatched(self, named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        wrapped = f".{self.family.attention}."
        return {name.replace(f"{wrapped}base_layer.", wrapped): tensor for name, tensor in named
                if f"{wrapped}memory." not in name}

    def memory_weights_hash(self) -> str:
        """sha256 of the memory parameters; recomputed only after they change."""
        return self._weights_hash.of(self.memory_parameters())

    def memory_parameters_changed(self) -> None:
        """Say that the memory parameters were replaced (e.g. made low-rank): the next hash is computed anew."""
        self._weights_hash.forget()

    def identity(self) -> dict:
        """What a `Memory` must have been made by to be used with this model (memory/state.py)."""
        return identity_of(self.name, self.base_model.config, len(self.layers), self.memory_attentions()[0].head_dim,
                           self.memory_weights_hash(), self.config)

    def check_memory(self, memory: Memory) -> None:
        """Refuse a memory made by another model or other settings."""
        check_identity(self.identity(), memory)

    # -- positions, ratios and caches ------------------------------------------------------------
    def rotate(self, keys: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Rotate keys [B, H_kv, n, d] by position offsets [n], in fp32 (the cache's `Rotate`)."""
        probe = torch.empty(0, device=keys.device, dtype=torch.float32)
        cos, sin = self.rotary(probe, offsets[None].to(keys.device))  # [1, n, d]
        scaling = float(getattr(self.rotary, "attention_scaling", 1.0))
        if scaling != 1.0:
            cos, sin = cos / scaling, sin / scaling
        return apply_rope(keys.float(), cos, sin).to(keys.dtype)

    def choose_ratio(self, num_tokens: int) -> int | None:
        """The fixed ratio for a context of `num_tokens`, checking the reach; None for step-random."""
        return choose_ratio(self.config, num_tokens, self.max_positions, self.name)

    def ratio_function(self, fixed: int | None, seed: int | None = None) -> RatioOf:
        """Window index -> ratio: `fixed` for every window, or (None) each window's seeded draw."""
        return ratio_function(self.config, fixed, seed)

    def new_cache(self, memory: Memory | None = None, reserve: int = 0, functional: bool = False) -> MemoryCache:
        """A working cache: empty, or a copy of `memory` with room for `reserve` more rows."""
        if memory is None:
            return MemoryCache(len(self.layers), self.rotate, functional=functional, allocation=Allocation(reserve))
        self.check_memory(memory)
        return MemoryCache.continuing(memory.keys, memory.values, memory.state, self.rotate, self.device,
                                      functional=functional, reserve=reserve)

    # -- the step --------------------------------------------------------------------------------
    def step(self, inputs: Sequence[StepInput], kind: StepKind = "window", keep_hidden: bool = True,
             exact: bool = True) -> list[torch.Tensor | None]:
        """Read one piece of a window into each input's cache, all in one pass over the layers.

        Per input: embed its raw tokens [B, n], insert the memory tokens the piece brings, run every
        layer over [memory | window so far | these rows] writing the rows' keys and values to its cache,
        and compact the window when the piece completes it. `kind` is the module docstring's. Returns
        each input's raw rows' last hidden states [B, n, D] (before the final norm), or None without
        `keep_hidden`. Several inputs are packed along one row axis; with `exact` each one's linear
        layers also round as alone (`project`, memory/attention.py).
        """
        if not inputs:
            raise ValueError("a step needs at least one piece to read")
        build = self._decode_rows if kind == "decode" else self._window_rows
        parts = [build(item) for item in inputs]
        if len(parts) == 1:
            part = parts[0]
            if kind == "decode":
                out = self.run_decoding(part.hidden, part.positions, part.context)
            else:
                out = self.run_layers(part.hidden, part.positions, part.context, compiled=True)
            outputs = [part.raw(out) if keep_hidden else None]
        else:
            packed = PackedStepRows.of(parts, self.rotary, self.base_dtype)
            out = self.run_layers(packed.hidden, packed.positions, packed.context, packed.position_embeddings,
                                  compiled=kind == "window", sequences=packed.sequence_rows(self.exact_products) if exact else None)
            outputs = packed.unpack(out) if keep_hidden else [None] * len(parts)
        for item in inputs:
            self.finish_piece(item)
        return outputs

    def _embedded_rows(self, item: StepInput) -> tuple[torch.Tensor, torch.Tensor, RawMemoryRows | None]:
        """A piece's raw tokens [B, n] -> its input states with the memory tokens it brings [B, T, D], their
        positions [1, T] and which rows are memory tokens (a `RawMemoryRows`, None: all raw)."""
        piece = item.piece
        end = piece.first_position + piece.num_rows
        if end > self.max_positions:
            raise ContextTooLongError(f"position {end} exceeds the {self.max_positions} positions of {self.name}; "
                                      "use a larger ratio or a shorter prompt")
        device = item.input_ids.device
        positions = torch.arange(piece.first_position, end, device=device)[None]  # [1, T]
        hidden = self.embed_tokens(item.input_ids)  # [B, n, D]
        rows = None
        if piece.num_memory:
            rows = raw_memory_rows(piece, device)
            hidden = self.with_memory_rows(hidden, rows)  # [B, T, D], sequence order
        return hidden, positions, rows

    def with_memory_rows(self, hidden: torch.Tensor, rows: RawMemoryRows) -> torch.Tensor:
        """Raw rows' input states [B, n, D] -> with the memory embedding inserted where `rows` puts the
        memory tokens [B, n + m, D], in sequence order: the one place memory rows are inserted."""
        memory = self.memory_embedding.to(hidden.dtype).expand(hidden.shape[0], rows.memory.shape[0], -1)
        return rows.merge(hidden, memory)

    def _window_rows(self, item: StepInput) -> StepRows:
        hidden, positions, rows = self._embedded_rows(item)
        piece, cache = item.piece, item.cache
        mask = piece_mask(self.config.attention, piece, positions.device)
        context = ValidRowsStep(cache, KeysSeen(prefix=piece.num_entries, mask=mask), rows=rows,
                             implementation=self.config.attn_implementation, dtype=self.base_dtype)
        return StepRows(hidden, positions, rows, context)

    def _decode_rows(self, item: StepInput) -> StepRows:
        piece, cache = item.piece, item.cache
        if (piece.num_raw != 1 or cache.keys[0] is None or cache.functional or torch.is_grad_enabled() or cache.keys[0].shape[0] != item.input_ids.shape[0]):
            raise ValueError("a decoding step reads one raw token into an allocated cache of its batch, in place, "
                             "without autograd; read other pieces as window steps")
        hidden, positions, rows = self._embedded_rows(item)
        capacity = cache.ensure_capacity(cache.length + piece.num_rows)
        bias = bucket_bias(self.config.attention, piece.ratio, piece.num_entries, piece.rows_before, piece.num_rows,
                           capacity, positions.device, self.base_dtype)  # [T, C]
        write_rows = torch.arange(cache.length, cache.length + piece.num_rows, device=positions.device)  # [T]
        context = WholeBufferStep(cache.keys, cache.values, write_rows, KeysSeen(bias=bias), rows, self.base_dtype,
                             self.config.attn_implementation)
        return StepRows(hidden, positions, rows, context)

    def run_layers(self, hidden: torch.Tensor, positions: torch.Tensor, context,
                   position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
                   compiled: bool = False, sequences: SequenceRows | None = None) -> torch.Tensor:
        """The decoder layers (`attention.decoder_block`) over a step's rows [B, T, D] at `positions` [1, T]
        with its context; `compiled`: through the compiled block where `compile_windows` made it; `sequences`:
        an exact batch's rows by sequence (`project`, memory/attention.py)."""
        if position_embeddings is None:
            position_embeddings = self.rotary(hidden, positions)
        block = self._compiled_layers.block if compiled and self._compiled_layers is not None else decoder_block
        for layer in self.layers:
            attention = getattr(layer, self.family.attention)

            def attend(normed: torch.Tensor, attention=attention) -> torch.Tensor:
                return attention(normed, position_embeddings, memory_step=context, sequences=sequences)[0]

            hidden = block(self.family, layer, hidden, attend, sequences)
        return hidden

    def run_decoding(self, hidden: torch.Tensor, positions: torch.Tensor, context: WholeBufferStep) -> torch.Tensor:
        """The decoder layers over a decoding step: compiled whole where `compile_decoding` made it so."""
        if self._compiled_decoding is not None:
            return self._compiled_decoding(hidden, positions, context)
        return self.run_layers(hidden, positions, context)

    def finish_piece(self, item: StepInput) -> None:
        """Record a piece written to its cache; compact its window when the piece completes it."""
        piece, cache = item.piece, item.cache
        if piece.completes_window:
            rows, shift = compaction_rows(self.config.window, piece.ratio, cache.keys[0].device)
            cache.compact(piece.num_entries, rows, shift, item.after)
        else:
            cache.mark_written(item.after)

    def read_tokens(self, input_ids: torch.Tensor, cache: MemoryCache, ratio_of: RatioOf | None = None,
                    keep_hidden: bool = False) -> list[torch.Tensor]:
        """Stream raw tokens [B, N] into a working cache (see `new_cache`), in any chunking: one window step
        per window piece. Returns each piece's raw rows' last hidden states (before the final norm) when
        `keep_hidden`. `ratio_of(window_index)` gives each new window its ratio; by default the first
        configured ratio, or a per-window draw under `step-random`."""
        if ratio_of is None:
            ratio_of = self.ratio_function(None if self.config.ratio_mix == "step-random" else self.config.ratios[0])
        outputs = []
        for item in plan_steps(input_ids, cache, self.config.window, ratio_of):
            hidden = self.step([item], keep_hidden=keep_hidden)[0]
            if keep_hidden:
                outputs.append(hidden)
        return outputs

    def read_tokens_batch(self, token_ids: Sequence[torch.Tensor], caches: Sequence[MemoryCache],
                          ratio_of: Sequence[RatioOf], kind: StepKind = "window", exact: bool = True
                          ) -> list[torch.Tensor | None]:
        """Read `token_ids[i]` ([1, n_i] raw tokens, n_i may be 0) into `caches[i]` (new windows' ratios from
        `ratio_of[i]`), all sequences in one `step` of `kind` per round of window pieces; returns each
        sequence's last raw row's hidden state [1, D] (before the final norm), None where nothing was fed.
        A sequence whose tokens span several windows brings one piece to each round, so a window completed
        by one sequence is compacted in its cache alone, at the step it completes."""
        if not len(token_ids) == len(caches) == len(ratio_of):
            raise ValueError(f"{len(token_ids)} token sequences, {len(caches)} caches and {len(ratio_of)} ratio "
                             "functions; give one cache and one ratio function per sequence")
        plans = [plan_steps(ids, cache, self.config.window, ratio)
                 for ids, cache, ratio in zip(token_ids, caches, ratio_of, strict=True)]
        last: list[torch.Tensor | None] = [None] * len(caches)
        for round_index in range(max((len(steps) for steps in plans), default=0)):
            members = [i for i, steps in enumerate(plans) if round_index < len(steps)]
            outputs = self.step([plans[i][round_index] for i in members], kind, exact=exact)
            for i, raw in zip(members, outputs, strict=True):
                last[i] = raw[:, -1]
        return last

    # -- compiled forms (memory/compiled.py) ------------------------------------------------------
    def compile_decoding(self, enabled: bool = True, mode: str | None = None, backend: str = "inductor") -> None:
        """Decode through the compiled step: the layers' forward over a decoding step's whole buffers as one
        graph, compiled at the first steps and replayed after. `mode` and `backend` are `torch.compile`'s;
        `mode="reduce-overhead"` on CUDA replays CUDA graphs. `enabled=False` goes back to the eager step.
        Results equal the eager step's up to the compiler's fusion of floating-point operations."""
        self._compiled_decoding = CompiledDecoding(self.run_layers, mode, backend) if enabled else None

    @property
    def decoding_compiled(self) -> bool:
        return self._compiled_decoding is not None

    def compile_windows(self, enabled: bool = True, mode: str | None = None, backend: str = "inductor",
                        dynamic: bool | None = None) -> None:
        """Run a window step's layers (memorize, training, scoring, prefill; not decoding steps) each through
        `torch.compile`, attention over the cache left eager: the rows' norms, projections, rotary embedding
        and MLP become a few fused kernels. `mode`, `backend` and `dynamic` are `torch.compile`'s;
        `enabled=False` goes back to the eager layers. Results equal the eager layers' up to the compiler's
        fusion of floating-point operations."""
        self._compiled_layers = CompiledLayers(decoder_block, mode, backend, dynamic) if enabled else None

    @property
    def windows_compiled(self) -> bool:
        return self._compiled_layers is not None

    # -- logits ----------------------------------------------------------------------------------
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Raw rows' last hidden states [..., D] (before the final norm) -> logits [..., V], in the model's dtype."""
        return self.lm_head(self.final_norm(hidden))

    def logits_alone(self, hidden: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """`[self.logits(h) for h in hidden]` ([1, D] each), each row's head product rounded as alone
        (`project`, memory/attention.py); the final norm runs once over all rows."""
        rows = torch.cat([self.final_norm(states) for states in hidden])  # [n, D]
        return list(project(self.lm_head, rows, SequenceRows.one_each(rows.shape[0], self.exact_products)).split(1))


def special_token_id(tokenizer, base_model, which: str) -> int:
    """The id of the `which` ("eos", "bos") token: the tokenizer's, else the model config's, else its
    generation config's (the first of a list)."""
    attr = f"{which}_token_id"
    token_id = getattr(tokenizer, attr, None) if tokenizer is not None else None
    if token_id is None:
        token_id = getattr(base_model.config, attr, None)
        if token_id is None and hasattr(base_model, "generation_config"):
            token_id = getattr(base_model.generation_config, attr, None)
    if isinstance(token_id, list | tuple):
        token_id = token_id[0]
    if token_id is None:
        raise ValueError(f"the model has no {which} token; set MemoryConfig.embed_init to the other option")
    return int(token_id)
