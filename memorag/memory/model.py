"""`MemoryModel`: a frozen decoder patched with memory tokens (docs/memory-model.md).

The base model's decoder layers run unchanged; each attention module is wrapped by a
`MemoryAttention`. A window's raw tokens run with a memory token inserted after every
ratio-th of them (memory embedding, memory projections), all rows in one causal
forward over [memory | current window]; when the window is complete it is compacted to
its memory tokens' keys and values. `step` is that one forward over one piece of a
window; `feed`, `memorize`, `forward` (memory/windows.py), the training objectives and
decoding (memory/decoding.py, memory/batch.py) are loops over it. Loading the weight
formats is memory/loading.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from memorag.stop_tokens import stop_token_ids

from .attention import MemoryAttention, StepContext, apply_rope, bucket_bias
from .batch import PackedRows
from .buffer_step import BufferStep, CompiledDecoding
from .cache import MemoryCache
from .chat import PromptLayout, prompt_ids, special_token_id
from .compiled_windows import CompiledLayers
from .config import MemoryConfig
from .families import family_of, get_submodule
from .identity import WeightsHash, check_identity, identity_of
from .linear import MemoryLinear, sequences_alone, use_memory_linears
from .loading import load_memory_model
from .memorizing import Reading
from .ratios import ContextTooLongError, RatioOf, choose_ratio, ratio_function
from .row_chunks import SCORE_CHUNK_ROWS, chunked_row_sums
from .schedule import ScheduleState
from .state import Memory
from .step import PieceRows, StepInput, plan_steps
from .window_tables import compaction_rows, piece_mask, row_split
from .windows import MemoryModelOutput, language_model_loss

__all__ = ["ContextTooLongError", "MemoryModel", "MemoryModelOutput"]


class MemoryModel(nn.Module):
    """A frozen causal LM plus memory parameters; see `from_pretrained`."""

    def __init__(self, base_model: nn.Module, config: MemoryConfig | None = None, tokenizer=None, name: str | None = None):
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
        use_memory_linears(self)  # few rows in one fixed shape: a packed batch's sequences round as alone
        self.gradient_checkpointing = False
        self.layout = PromptLayout.for_tokenizer(tokenizer)
        self._weights_hash = WeightsHash()
        self._compiled_decoding: CompiledDecoding | None = None
        self._compiled_layers: CompiledLayers | None = None
        heads = base_model.config.num_attention_heads  # grouped-query attention: a constant of the base
        self._grouped_attention = heads != getattr(base_model.config, "num_key_value_heads", heads)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        base: str | None = None,
        memory_weights: str | Path | None = "auto",
        config: MemoryConfig | None = None,
        **load_kwargs,
    ) -> MemoryModel:
        """Load a base causal LM (hub id, local directory, or the embedded default) and patch it.

        `memory_weights` is a directory written by `save_memory_weights`, a hub id of one, or
        a name (`memorag.memory.weights.memory_weights_for`): "auto", the default, loads the trained
        weights shipped for the embedded SmolLM2 when `base` is the embedded model and
        leaves any other base's memory projections as untrained copies of its own;
        "embedded" asks for the shipped weights; "untrained" (or None) for the copies. The
        weights' config is used unless `config` is given (e.g. stage-2 ratios over stage-1 weights), which
        must then have the same `memory_params` (the shapes of the weights).

        A released memory-model checkpoint (a folder or hub id whose config carries
        `beacon_*` settings and whose weights carry `beacon_*` tensors, as MemoRAG's
        and Activation Beacon's releases do) loads as it is: its settings become the
        `MemoryConfig` (at one fixed ratio; pass `config` for another) and its memory
        tensors the memory parameters. A folder without tokenizer files loads too;
        it then reads token ids only.
        """
        return load_memory_model(cls, base, memory_weights, config, **load_kwargs)

    # -- parts of the base model ---------------------------------------------------------
    @property
    def layers(self) -> nn.ModuleList:
        return get_submodule(self.base_model, self.family.layers)

    @property
    def embed_tokens(self) -> nn.Embedding:
        return get_submodule(self.base_model, self.family.embed_tokens)

    @property
    def final_norm(self) -> nn.Module:
        return get_submodule(self.base_model, self.family.final_norm)

    @property
    def rotary(self) -> nn.Module:
        return get_submodule(self.base_model, self.family.rotary)

    @property
    def lm_head(self) -> nn.Module:
        return get_submodule(self.base_model, self.family.lm_head)

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

    def memory_attentions(self) -> Iterator[MemoryAttention]:
        for layer in self.layers:
            yield getattr(layer, self.family.attention)

    def memory_parameters(self) -> dict[str, nn.Parameter]:
        """The trainable parameters, by construction: the memory embedding and projections."""
        params = {"embedding": self.memory_embedding}
        for index, attention in enumerate(self.memory_attentions()):
            for name, param in attention.memory.named_parameters():
                params[f"layers.{index}.{name}"] = param
        return params

    def base_state_dict(self) -> dict[str, torch.Tensor]:
        """The frozen base model's weights under its own names (as if it were not patched)."""
        wrapped = f".{self.family.attention}."
        state = {}
        for name, tensor in self.base_model.state_dict().items():
            if f"{wrapped}memory." in name:
                continue
            state[name.replace(f"{wrapped}base_layer.", wrapped)] = tensor
        return state

    def memory_weights_hash(self) -> str:
        """sha256 of the memory parameters; recomputed only after they change."""
        return self._weights_hash.of(self.memory_parameters())

    def identity(self) -> dict:
        """What a `Memory` must have been made by to be used with this model (memory/identity.py)."""
        return identity_of(self)

    def save_memory_weights(self, directory: str | Path, inference_ratio: int | None = None) -> Path:
        """The memory weights in `directory`; `inference_ratio` is the ratio they memorize at once loaded
        (default: the one ratio trained, or the largest of a step-random mix)."""
        from .checkpoint import save_memory_weights

        return save_memory_weights(self, directory, inference_ratio)

    def memory_parameters_changed(self) -> None:
        """Say that the memory parameters were replaced (e.g. made low-rank): the next hash is computed anew."""
        self._weights_hash.forget()

    # -- positions and ratios ----------------------------------------------------------------
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

    # -- the step: one piece of a window ----------------------------------------------------------
    def step(self, inputs: Sequence[StepInput], keep_hidden: bool = True, exact: bool = True
             ) -> list[torch.Tensor | None]:
        """Read one piece of a window into each input's cache, all in one pass over the layers.

        Per input: embed its raw tokens [B, n], insert the memory tokens the piece brings,
        run every layer over [memory | window so far | these rows] writing the rows' keys and
        values to its cache, and compact the window when the piece completes it. Returns each
        input's raw rows' last hidden states [B, n, D] (before the final norm), or None without
        `keep_hidden`. Several inputs are packed along one row axis (memory/batch.py), each
        attending over its own cache as alone; with `exact` each one's linear layers also round
        as alone. See docs/memory-model.md, "The step".
        """
        if not inputs:
            raise ValueError("a step needs at least one piece to read")
        shared = inputs[0].cache.shared
        if self._compiled_decoding is not None and shared is not None and shared.serves(inputs):
            # several prompts' decoding round, one batch through the compiled step (memory/shared_buffers.py)
            hidden, positions, context, rows = shared.round(self, inputs, self._grouped_attention)
            out = self._compiled_decoding(hidden, positions, context)  # [P, T, D]
            for item in inputs:
                self._commit(item)
            return [out[row : row + 1, :1] if keep_hidden else None for row in rows]
        parts = [self._piece_rows(item) for item in inputs]
        if len(parts) == 1:
            part = parts[0]
            run = self._run_layers
            if self._compiled_decoding is not None and isinstance(part.context, BufferStep):
                run = self._compiled_decoding
            out = run(part.hidden, part.positions, part.context)  # [B, T, D]
            outputs = [part.raw(out) if keep_hidden else None]
        else:
            packed = PackedRows.of(parts, self.rotary, self.base_dtype)
            with packed.linears(exact):
                out = self._run_layers(packed.hidden, packed.positions, packed.context, packed.position_embeddings)
            outputs = packed.unpack(out) if keep_hidden else [None] * len(parts)
        for item in inputs:
            self._commit(item)
        return outputs

    def compile_decoding(self, enabled: bool = True, mode: str | None = None, backend: str = "inductor") -> None:
        """Decode through the compiled step (memory/buffer_step.py): the layers' forward over a decoding
        step's whole buffers as one graph, compiled at the first steps and replayed after. `mode` and
        `backend` are `torch.compile`'s; `mode="reduce-overhead"` on CUDA replays CUDA graphs.
        `enabled=False` goes back to the eager step. Results equal the eager step's up to the
        compiler's fusion of floating-point operations."""
        self._compiled_decoding = CompiledDecoding(self._run_layers, mode, backend) if enabled else None

    @property
    def decoding_compiled(self) -> bool:
        return self._compiled_decoding is not None

    def compile_windows(self, enabled: bool = True, mode: str | None = None, backend: str = "inductor",
                        dynamic: bool | None = None) -> None:
        """Run a window's layers (memorize, training, scoring, prefill; not decoding steps) each through
        `torch.compile`, attention over the cache left eager (memory/compiled_windows.py): the rows'
        norms, projections, rotary embedding and MLP become a few fused kernels. The layers compile at
        the first window and are shared by every layer. `mode`, `backend` and `dynamic` are
        `torch.compile`'s; `enabled=False` goes back to the eager layers. Results equal the eager
        layers' up to the compiler's fusion of floating-point operations."""
        self._compiled_layers = CompiledLayers(self.layers, mode, backend, dynamic) if enabled else None

    @property
    def windows_compiled(self) -> bool:
        return self._compiled_layers is not None

    def _piece_rows(self, item: StepInput) -> PieceRows:
        """A piece's raw tokens [B, n] -> its rows with the memory tokens it brings, positions, context."""
        piece, cache = item.piece, item.cache
        end = piece.first_position + piece.num_rows
        if end > self.max_positions:
            raise ContextTooLongError(
                f"position {end} exceeds the {self.max_positions} positions of {self.name}; "
                "use a larger ratio or a shorter prompt"
            )
        device = item.input_ids.device
        positions = torch.arange(piece.first_position, end, device=device)[None]  # [1, T]
        hidden = self.embed_tokens(item.input_ids)  # [B, n, D]
        rows = None
        if piece.num_memory:
            rows = row_split(piece, device)  # built once per kind of piece (memory/window_tables.py)
            memory = self.memory_embedding.to(hidden.dtype).expand(hidden.shape[0], piece.num_memory, -1)
            hidden = rows.merge(hidden, memory)  # [B, T, D], sequence order
        capacity = self._decoding_capacity(item)
        if capacity is not None:  # a decoding step: whole buffers, shapes that repeat (memory/buffer_step.py)
            bias = bucket_bias(self.config.attention, piece.ratio, piece.num_entries, piece.rows_before,
                               piece.num_rows, capacity, device, self.base_dtype)  # [T, C]
            write_rows = torch.arange(cache.length, cache.length + piece.num_rows, device=device)  # [T]
            context = BufferStep(cache.keys, cache.values, write_rows, bias, rows, self.base_dtype,
                                 self._grouped_attention)
            return PieceRows(hidden, positions, rows, context)
        mask = piece_mask(self.config.attention, piece, device)
        context = StepContext(cache, prefix=piece.num_entries, rows=rows, mask=mask,
                              implementation=self.config.attn_implementation, dtype=self.base_dtype)
        cache.note_positions(positions[0])
        return PieceRows(hidden, positions, rows, context)

    def _decoding_capacity(self, item: StepInput) -> int | None:
        """The cache's capacity when `item` is a decoding step (one raw token, plus the memory token it may
        bring, written in place over an allocated cache of its batch): its attention then reads the whole
        buffers, so its shapes repeat token after token (docs/memory-model.md, "Decoding"). None otherwise."""
        cache, piece = item.cache, item.piece
        in_place = not cache.functional and not torch.is_grad_enabled() and cache.rotated_keys
        allocated = cache.keys[0] is not None and cache.keys[0].shape[0] == item.input_ids.shape[0]
        if piece.num_raw != 1 or not in_place or not allocated or self.config.attn_implementation != "sdpa":
            return None
        return cache.ensure_capacity(cache.length + piece.num_rows)

    def _run_layers(self, hidden: torch.Tensor, positions: torch.Tensor, context,
                    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        if position_embeddings is None:
            position_embeddings = self.rotary(hidden, positions)
        layers = self.layers
        if self._compiled_layers is not None and not isinstance(context, BufferStep):
            layers = self._compiled_layers  # a window's rows, not a decoding step (memory/compiled_windows.py)
        for layer in layers:
            hidden = layer(hidden, attention_mask=None, position_ids=positions,
                           position_embeddings=position_embeddings, memory_step=context)
        return hidden

    def _commit(self, item: StepInput) -> None:
        """Record a piece written to its cache; compact its window when the piece completes it."""
        piece, after, cache = item.piece, item.after, item.cache
        if piece.completes_window:
            window = self.config.window
            cache.advance(ScheduleState(num_tokens=after.num_tokens, num_entries=piece.num_entries,
                                        window_index=after.window_index - 1, raw_in_window=window,
                                        ratio=piece.ratio))
            cache.compact(after, *compaction_rows(window, piece.ratio, cache.keys[0].device))
        else:
            cache.advance(after)

    def feed(self, input_ids: torch.Tensor, cache: MemoryCache, ratio_of: RatioOf | None = None,
             keep_hidden: bool = False) -> list[torch.Tensor]:
        """Stream raw tokens [B, N] into a working cache (see `new_cache`), in any chunking: one `step`
        per window piece. Returns each piece's raw rows' last hidden states (before the final norm)
        when `keep_hidden`. `ratio_of(window_index)` gives each new window its ratio; by default the
        first configured ratio, or a per-window draw under `step-random`.
        """
        if ratio_of is None:
            ratio_of = self.ratio_function(None if self.config.ratio_mix == "step-random" else self.config.ratios[0])
        outputs = []
        for item in plan_steps(input_ids, cache, self.config.window, ratio_of):
            hidden = self.step([item], keep_hidden=keep_hidden)[0]
            if keep_hidden:
                outputs.append(hidden)
        return outputs

    def new_cache(self, memory: Memory | None = None, reserve: int = 0, functional: bool = False,
                  rotated_keys: bool = True) -> MemoryCache:
        """A working cache: empty, or a copy of `memory` with room for `reserve` more rows."""
        if memory is None:
            return MemoryCache(len(self.layers), self.rotate, functional=functional, rotated_keys=rotated_keys,
                               reserve=reserve)
        self.check_memory(memory)
        return MemoryCache.continuing(memory.keys, memory.values, memory.state, self.rotate, self.device,
                                      functional=functional, reserve=reserve)

    def check_memory(self, memory: Memory) -> None:
        """Refuse a memory made by another model or other settings."""
        check_identity(self.identity(), memory)

    # -- tokens ---------------------------------------------------------------------------------
    def prompt_ids(self, prompt, memory: Memory | None = None) -> list[int]:
        """The ids a prompt (text or ids) is read as: continuing `memory`'s layout, or alone (memory/chat.py)."""
        return prompt_ids(self.tokenizer, self.layout, prompt, memory)

    def stop_ids(self) -> list[int]:
        """The ids that end a reply: the one rule shared with the local generator (`memorag.stop_tokens`)."""
        return stop_token_ids(self.tokenizer, self.base_model)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True) if self.tokenizer is not None else str(ids)

    # -- public inference ---------------------------------------------------------------------------
    @torch.no_grad()
    def memorize(self, text_or_token_ids, memory: Memory | None = None, show_progress: bool | None = None) -> Memory:
        """Read a context window by window and return its `Memory`; bounded memory use.

        Text is laid out as the start of a user turn (the chat template's prefix, then
        the text); token ids are read as they are. With `memory`, the new content
        continues that memory (which is not changed): reading a text in several calls
        gives the same memory as one call. The ids go to the device once; the window loop
        reads no tensor value back (docs/memory-model.md, "Memorizing").
        """
        reading = Reading.start(self, text_or_token_ids, memory)
        window, total = self.config.window, len(reading.ids)
        show = total > 4 * window if show_progress is None else show_progress
        with tqdm(total=total, desc="memorize", unit="tok", disable=not show) as bar:
            for item in plan_steps(reading.input_ids, reading.cache, window, reading.ratio_of):  # one per window
                self.step([item], keep_hidden=False)
                bar.update(item.piece.num_raw)
        return reading.memory(self)

    @torch.no_grad()
    def memorize_batch(self, texts_or_token_ids: Sequence, memory: Memory | None = None, exact: bool = True
                       ) -> list[Memory]:
        """`memorize` for several separate contexts at once (each from nothing, or each continuing
        `memory`): their window pieces are packed along one row axis, one pass over the layers per
        round of pieces, each context attending over its own cache (memory/batch.py). With `exact`
        (the default) each context's linear layers also round as alone, so every memory equals the one
        `memorize` makes of that context alone."""
        if isinstance(texts_or_token_ids, str) or not texts_or_token_ids:
            raise ValueError("give a list of contexts (texts or token ids), at least one")
        from .batch import feed_batch

        readings = [Reading.start(self, context, memory) for context in texts_or_token_ids]
        feed_batch(self, [reading.input_ids for reading in readings], [reading.cache for reading in readings],
                   [reading.ratio_of for reading in readings], exact=exact)
        return [reading.memory(self) for reading in readings]

    @torch.no_grad()
    def generate_ids(
        self,
        prompt,
        memory: Memory | None = None,
        max_new_tokens: int = 128,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        on_token: Callable[[int], None] | None = None,
        **generate_kwargs,
    ) -> list[int]:
        """Token ids generated after `memory` (unchanged) and `prompt` (text or ids), by transformers'
        `generate` (memory/decoding.py): greedy by default; `do_sample` with `temperature` and
        `top_p`, reproducible with `seed`; `on_token` is called with each new token. Any other
        `generate` option passes through (`top_k`, `repetition_penalty`, `stopping_criteria`,
        `logits_processor`, `streamer`, ...); beam search is not supported."""
        return self.generate_ids_batch([prompt], memory, max_new_tokens, do_sample, temperature, top_p, seed,
                                       on_token, **generate_kwargs)[0]

    @torch.no_grad()
    def generate_ids_batch(
        self,
        prompts: Sequence,
        memory: Memory | None = None,
        max_new_tokens: int = 128,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        on_token: Callable[[int], None] | None = None,
        exact: bool = True,
        **generate_kwargs,
    ) -> list[list[int]]:
        """`generate_ids` for several prompts over one memory, decoded together as one batch: each
        prompt reads the memory and its own tokens as alone (memory/batch.py); with `exact` (the
        default) its linear layers also round as alone, so greedy replies equal the one-by-one
        ones token for token; `exact=False` shares the matrix products (faster where a lone row's
        kernel is slow; a reply can then differ where two tokens tie). A sampled batch draws its
        random numbers in another order than one-by-one calls do."""
        if isinstance(prompts, str) or not prompts:
            raise ValueError("give a list of prompts (text or token ids), at least one")
        ids_per_prompt = [self.prompt_ids(prompt, memory) for prompt in prompts]
        if not all(ids_per_prompt):
            raise ValueError("the prompt is empty")
        ratios = [memory.ratio if memory is not None else self.choose_ratio(len(ids)) for ids in ids_per_prompt]
        from .decoding import decode

        return decode(self, ids_per_prompt, memory, ratios, max_new_tokens, do_sample, temperature, top_p, seed, on_token,
                      generate_kwargs, exact=exact)

    def generate(self, prompt, memory: Memory | None = None, max_new_tokens: int = 128, **kwargs) -> str:
        """Continue from `memory` (never changed; one memory serves many prompts) and `prompt`; takes
        `generate_ids`' options."""
        ids = self.generate_ids(prompt, memory=memory, max_new_tokens=max_new_tokens, **kwargs)
        return self._decode(ids)

    def generate_batch(self, prompts: Sequence, memory: Memory | None = None, max_new_tokens: int = 128,
                       **kwargs) -> list[str]:
        """`generate` for several prompts over one memory, decoded as one batch (see `generate_ids_batch`)."""
        return [self._decode(ids) for ids in self.generate_ids_batch(prompts, memory, max_new_tokens, **kwargs)]

    # -- training / scoring --------------------------------------------------------------------------
    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor | None = None,
        return_logits: bool = False,
        memory: Memory | None = None,
        ratio_seed: int | None = None,
    ) -> MemoryModelOutput:
        """Read `input_ids` [B, N] (equal lengths) window by window from `memory` (or empty).

        `labels` [B, N] follow the Hugging Face convention (the model shifts them; -100
        is ignored). The loss is next-token cross-entropy on raw tokens only; gradients
        reach earlier windows through the memory. With `gradient_checkpointing` on, each
        window is recomputed in the backward pass (memory/windows.py).
        """
        return language_model_loss(self, input_ids, labels, return_logits, memory, ratio_seed)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Raw rows' last hidden states [..., D] (before the final norm) -> logits [..., V], in the model's dtype."""
        return self.lm_head(self.final_norm(hidden))

    def logits_alone(self, hidden: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """`[self.logits(h) for h in hidden]` ([1, D] each), each rounded as alone; on the CPU in float32 the
        LM head's weight is read once for all of them (memory/linear.py). A head that is not a `MemoryLinear`
        (a quantized one) takes each row alone."""
        if type(self.lm_head) is not MemoryLinear:
            return [self.logits(states) for states in hidden]
        rows = torch.cat([self.final_norm(states) for states in hidden])  # [n, D]
        with sequences_alone({rows.shape[0]: list(range(rows.shape[0] + 1))}):
            return list(self.lm_head(rows).split(1))

    def score_labelled(self, hidden: torch.Tensor, targets: torch.Tensor, teacher_states: torch.Tensor | None = None,
                       chunk_rows: int = SCORE_CHUNK_ROWS) -> tuple[torch.Tensor, torch.Tensor]:
        """The scoring hook for labelled rows: `hidden` [B, n, D] (raw rows from `step`), `targets` [B, n]
        (-100: no label) -> (summed cross-entropy [], summed KL(teacher || model) [], 0 without a teacher).

        `teacher_states` [B, n, D] are a teacher's last hidden states at the same rows, after its final
        norm (the frozen base reading the whole sequence, memorag/training/objectives.py); its logits
        come from this model's head. Rows without a label get no logits at all (most rows of an SFT
        sample; one row's logits cost a quarter of the rest of a small model with a large vocabulary),
        and the labelled rows' logits are computed `chunk_rows` rows at a time (memory/row_chunks.py)."""
        keep = targets != -100  # [B, n]
        rows = (hidden[keep], targets[keep])  # [k, D], [k]
        if teacher_states is None:
            return *chunked_row_sums(self._cross_entropy_sum, rows, chunk_rows), hidden.new_zeros((), dtype=torch.float32)
        return chunked_row_sums(self._distillation_sums, (*rows, teacher_states[keep]), chunk_rows)

    def _cross_entropy_sum(self, rows: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor]:
        logits = self.logits(rows).float()  # [c, V]
        return (F.cross_entropy(logits, targets, reduction="sum"),)

    def _distillation_sums(self, rows: torch.Tensor, targets: torch.Tensor, teacher_states: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.logits(rows).float()  # [c, V]
        teacher = F.log_softmax(self.lm_head(teacher_states).float(), dim=-1)  # [c, V]
        kl = F.kl_div(F.log_softmax(logits, dim=-1), teacher, log_target=True, reduction="sum")
        return F.cross_entropy(logits, targets, reduction="sum"), kl

