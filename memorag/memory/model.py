"""`MemoryModel`: a frozen decoder patched with memory tokens (docs/memory-model.md).

The base model's decoder layers run unchanged; each attention module is wrapped by a
`MemoryAttention`. A window's raw tokens run with a memory token inserted after every
ratio-th of them (memory embedding, memory projections), all rows in one causal
forward over [memory | current window]; when the window is complete it is compacted to
its memory tokens' keys and values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from memorag.stop_tokens import stop_token_ids

from .attention import MemoryAttention, PackedStep, RowSplit, StepContext, apply_rope, window_mask
from .cache import MemoryCache
from .chat import PromptLayout
from .config import MemoryConfig
from .families import family_of, get_submodule
from .schedule import (
    LAYOUT,
    Piece,
    ScheduleState,
    memory_rows_of_window,
    plan,
    positions_needed,
    reach,
    smallest_fitting_ratio,
    window_ratio,
)
from .state import Memory, MemoryMismatchError

STANDARD_RATIOS = (2, 4, 8, 16, 32, 64, 128)


class ContextTooLongError(ValueError):
    """The context does not fit in the model's positions at the chosen ratio."""


@dataclass
class MemoryModelOutput:
    loss: torch.Tensor | None  # mean next-token loss over raw tokens with a label
    num_loss_tokens: int
    logits: torch.Tensor | None = None  # [B, N, V] for raw tokens, only when asked for


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
        init_id = self._token_id(self.config.embed_init)
        embedding = self.embed_tokens.weight[init_id].detach().clone()
        self.memory_embedding = nn.Parameter(embedding, requires_grad=True)  # [D]
        self.gradient_checkpointing = False
        self.layout = PromptLayout.for_tokenizer(tokenizer)
        self._weights_hash: tuple[tuple[int, ...], str] | None = None

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
        from transformers import AutoConfig, AutoModelForCausalLM

        from memorag.embedded import resolve_lm

        from .checkpoint import load_memory_weights, read_memory_weights_config
        from .released import (
            is_released_config,
            load_released_memory_weights,
            memory_config_from_released,
            released_settings,
        )
        from .weights import memory_weights_for

        name = base or "embedded"
        path = resolve_lm(base)
        base_config = AutoConfig.from_pretrained(path, trust_remote_code=False)
        released = is_released_config(base_config)
        if released:
            if memory_weights is not None and str(memory_weights).strip().lower() != "auto":
                raise ValueError(
                    f"{name} is a released memory-model checkpoint that carries its own memory weights; "
                    "do not pass memory_weights with it"
                )
            trained = memory_config_from_released(released_settings(base_config))
            if config is not None and config.memory_params != trained.memory_params:
                raise ValueError(
                    f"config.memory_params={config.memory_params!r} but {name} holds {trained.memory_params!r} "
                    "memory projections; pass config=None to use its own settings"
                )
            config = config or trained
        else:
            memory_weights = memory_weights_for(base, memory_weights)  # a local folder (a hub id downloaded), or None
        if not released and memory_weights is not None:
            saved = read_memory_weights_config(memory_weights)
            if config is not None and config.memory_params != saved.memory_params:
                raise ValueError(
                    f"config.memory_params={config.memory_params!r} but the memory weights in {memory_weights} "
                    f"hold {saved.memory_params!r} projections; pass config=None to use the saved config"
                )
            config = config or saved
        load_kwargs.setdefault("dtype", "auto")
        load_kwargs.setdefault("trust_remote_code", False)
        tokenizer = _load_tokenizer(path)
        with _quiet_unused_weights(released):
            base_model = AutoModelForCausalLM.from_pretrained(path, **load_kwargs)
        base_model.eval()
        model = cls(base_model, config=config, tokenizer=tokenizer, name=_display_name(name, path))
        if released:
            load_released_memory_weights(model, _local_folder(path))
            for key in released_settings(base_model.config):  # the settings now live in model.config
                delattr(base_model.config, key)
        elif memory_weights is not None:
            load_memory_weights(model, memory_weights)
        return model

    def _token_id(self, which: str) -> int:
        attr = f"{which}_token_id"
        token_id = getattr(self.tokenizer, attr, None) if self.tokenizer is not None else None
        if token_id is None:
            token_id = getattr(self.base_model.config, attr, None)
            if token_id is None and hasattr(self.base_model, "generation_config"):
                token_id = getattr(self.base_model.generation_config, attr, None)
        if isinstance(token_id, list | tuple):
            token_id = token_id[0]
        if token_id is None:
            raise ValueError(f"the model has no {which} token; set MemoryConfig.embed_init to the other option")
        return int(token_id)

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
        params = self.memory_parameters()
        versions = tuple(p._version for p in params.values()) + tuple(p.data_ptr() for p in params.values())
        if self._weights_hash is None or self._weights_hash[0] != versions:
            digest = hashlib.sha256()
            for name in sorted(params):
                digest.update(name.encode())
                digest.update(params[name].detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
            self._weights_hash = (versions, digest.hexdigest())
        return self._weights_hash[1]

    def identity(self) -> dict:
        """What a `Memory` must have been made by to be used with this model."""
        config = self.base_model.config
        return {
            "base_model": self.name,
            "model_type": config.model_type,
            "num_layers": len(self.layers),
            "hidden_size": config.hidden_size,
            "num_key_value_heads": config.num_key_value_heads,
            "head_dim": next(iter(self.memory_attentions())).head_dim,
            "memory_weights_sha256": self.memory_weights_hash(),
            "memory_config": self.config.to_dict(),
            "layout": LAYOUT,
        }

    def save_memory_weights(self, directory: str | Path, inference_ratio: int | None = None) -> Path:
        """The memory weights in `directory`; `inference_ratio` is the ratio they memorize at once loaded
        (default: the one ratio trained, or the largest of a step-random mix)."""
        from .checkpoint import save_memory_weights

        return save_memory_weights(self, directory, inference_ratio)

    # -- positions and ratios ----------------------------------------------------------------
    def _rotate(self, keys: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """Rotate keys [B, H_kv, n, d] by position offsets [n], in fp32."""
        probe = torch.empty(0, device=keys.device, dtype=torch.float32)
        cos, sin = self.rotary(probe, offsets[None].to(keys.device))  # [1, n, d]
        scaling = float(getattr(self.rotary, "attention_scaling", 1.0))
        if scaling != 1.0:
            cos, sin = cos / scaling, sin / scaling
        return apply_rope(keys.float(), cos, sin).to(keys.dtype)

    def choose_ratio(self, num_tokens: int) -> int | None:
        """The fixed ratio for a context of `num_tokens`, checking the reach; None for step-random."""
        config, window = self.config, self.config.window
        if config.ratio_mix == "step-random":
            worst = min(config.ratios)
            if positions_needed(num_tokens, window, worst) > self.max_positions:
                self._too_long(num_tokens, worst)
            return None
        if config.ratio_mix == "adaptive":
            ratio = smallest_fitting_ratio(num_tokens, self.max_positions, window, config.ratios)
            if ratio is None:
                self._too_long(num_tokens, max(config.ratios))
            return ratio
        ratio = config.ratios[0]
        if positions_needed(num_tokens, window, ratio) > self.max_positions:
            self._too_long(num_tokens, ratio)
        return ratio

    def _too_long(self, num_tokens: int, ratio: int) -> None:
        window = self.config.window
        fits = smallest_fitting_ratio(num_tokens, self.max_positions, window, STANDARD_RATIOS)
        if fits is not None:
            choices = ",".join(str(r) for r in STANDARD_RATIOS if window % r == 0)  # includes `fits`
            advice = (
                f"the smallest ratio that fits is {fits}: memorize with `--ratio {fits}` (or "
                f"`--set 'memory.ratios=[{fits}]'`), or let the "
                f"length pick the ratio: `--set memory.ratio_mix=adaptive --set 'memory.ratios=[{choices}]'`"
            )
        else:
            advice = "no ratio dividing the window fits; shorten the context or use a model with more positions"
        raise ContextTooLongError(
            f"the context has {num_tokens} tokens, beyond the reach of {self.name} at ratio {ratio} "
            f"({reach(self.max_positions, window, ratio)} tokens with {self.max_positions} positions and "
            f"window {window}); {advice}"
        )

    def _ratio_function(self, fixed: int | None, seed: int | None = None) -> Callable[[int], int]:
        if fixed is not None:
            return lambda _index: fixed
        config = self.config
        seed = config.seed if seed is None else seed
        return lambda index: window_ratio(index, config.ratios, config.ratio_mix, seed)

    # -- one step over a piece of a window ---------------------------------------------------------
    def _run_layers(self, hidden: torch.Tensor, positions: torch.Tensor, step: StepContext | PackedStep,
                    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        if isinstance(step, StepContext):
            step.cache.note_positions(positions[0])
        if position_embeddings is None:
            position_embeddings = self.rotary(hidden, positions)
        for layer in self.layers:
            hidden = layer(
                hidden,
                attention_mask=None,
                position_ids=positions,
                position_embeddings=position_embeddings,
                memory_step=step,
            )
        return hidden

    def _piece_inputs(self, input_ids: torch.Tensor, piece: Piece, cache: MemoryCache):
        """Raw tokens [B, n] of one piece -> (its rows' input states [B, T, D] with the memory tokens
        it brings, positions [1, T], which rows are memory tokens, the step context)."""
        end = piece.first_position + piece.num_rows
        if end > self.max_positions:
            raise ContextTooLongError(
                f"position {end} exceeds the {self.max_positions} positions of {self.name}; "
                "use a larger ratio or a shorter prompt"
            )
        device = input_ids.device
        positions = torch.arange(piece.first_position, end, device=device)[None]  # [1, T]
        hidden = self.embed_tokens(input_ids)  # [B, n, D]
        rows = None
        if piece.num_memory:
            rows = RowSplit.of(*piece.row_kinds(), device=device)
            memory = self.memory_embedding.to(hidden.dtype).expand(hidden.shape[0], piece.num_memory, -1)
            hidden = rows.merge(hidden, memory)  # [B, T, D], sequence order
        mask = window_mask(self.config.attention, piece.ratio, piece.rows_before, piece.num_rows, device)
        step = StepContext(cache, prefix=piece.num_entries, rows=rows, mask=mask,
                           implementation=self.config.attn_implementation, dtype=self.base_dtype)
        return hidden, positions, rows, step

    def _piece_pass(self, input_ids: torch.Tensor, piece: Piece, cache: MemoryCache) -> torch.Tensor:
        """Raw tokens [B, n] of one piece, with the memory tokens they bring, -> raw rows' last
        hidden states [B, n, D] (before the final norm)."""
        hidden, positions, rows, step = self._piece_inputs(input_ids, piece, cache)
        hidden = self._run_layers(hidden, positions, step)
        return rows.split(hidden)[0] if rows is not None else hidden

    def _commit(self, cache: MemoryCache, piece: Piece, after: ScheduleState) -> None:
        """Record a piece written to `cache`; compact its window when the piece completes it."""
        if piece.completes_window:
            window = self.config.window
            cache.advance(ScheduleState(num_tokens=after.num_tokens, num_entries=piece.num_entries,
                                        window_index=after.window_index - 1, raw_in_window=window,
                                        ratio=piece.ratio))
            cache.compact(after, memory_rows_of_window(window, piece.ratio))
        else:
            cache.advance(after)

    def feed(
        self,
        input_ids: torch.Tensor,
        cache: MemoryCache,
        ratio_of: Callable[[int], int] | None = None,
        keep_hidden: bool = False,
    ) -> list[torch.Tensor]:
        """Stream raw tokens [B, N] into a working cache (see `new_cache`), in any chunking.

        Memory tokens are inserted after every ratio-th raw token of a window as the raw
        tokens arrive; a window is compacted as soon as it is complete. Returns each
        piece's raw rows' last hidden states (before the final norm) when `keep_hidden`.
        `ratio_of(window_index)` gives each new window its ratio; by default the first
        configured ratio, or a per-window draw under `step-random`.
        """
        if ratio_of is None:
            ratio_of = self._ratio_function(None if self.config.ratio_mix == "step-random" else self.config.ratios[0])
        window = self.config.window
        outputs = []
        for piece, after in plan(cache.state, input_ids.shape[1], window, ratio_of):
            hidden = self._piece_pass(input_ids[:, piece.raw_start : piece.raw_end], piece, cache)
            if keep_hidden:
                outputs.append(hidden)
            self._commit(cache, piece, after)
        return outputs

    def new_cache(self, memory: Memory | None = None, reserve: int = 0, functional: bool = False,
                  rotated_keys: bool = True) -> MemoryCache:
        """A working cache: empty, or a copy of `memory` with room for `reserve` more rows."""
        num_layers = len(self.layers)
        if memory is None:
            return MemoryCache(num_layers, self._rotate, functional=functional, rotated_keys=rotated_keys,
                               reserve=reserve)
        self.check_memory(memory)
        keys, values = [], []
        for k, v in zip(memory.keys, memory.values, strict=True):
            shape = (*k.shape[:2], k.shape[2] + max(reserve, 1), k.shape[3])
            new_k = k.new_empty(shape, device=self.device)
            new_v = v.new_empty(shape, device=self.device)
            new_k[:, :, : k.shape[2]] = k
            new_v[:, :, : v.shape[2]] = v
            keys.append(new_k)
            values.append(new_v)
        return MemoryCache(num_layers, self._rotate, state=memory.state, keys=keys, values=values,
                           functional=functional, reserve=reserve)

    def check_memory(self, memory: Memory) -> None:
        mine = self.identity()
        differences = [key for key in sorted(set(mine) | set(memory.identity)) if mine.get(key) != memory.identity.get(key)]
        if differences:
            detail = "; ".join(f"{key}: memory has {memory.identity.get(key)!r}, model has {mine.get(key)!r}"
                               for key in differences)
            raise MemoryMismatchError(
                f"this memory was made by another model or other settings ({detail}); memorize the context "
                "again with this model"
            )

    # -- tokens ---------------------------------------------------------------------------------
    def _encode(self, text: str, first: bool) -> list[int]:
        if self.tokenizer is None:
            raise ValueError("this MemoryModel has no tokenizer; pass token ids instead of text")
        add_special = first and not self.layout.chat
        return self.tokenizer(text, add_special_tokens=add_special)["input_ids"]

    def _as_ids(self, ids) -> torch.Tensor:
        tensor = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        return tensor[None] if tensor.dim() == 1 else tensor

    # -- public inference ---------------------------------------------------------------------------
    @torch.no_grad()
    def memorize(self, text_or_token_ids, memory: Memory | None = None, show_progress: bool | None = None) -> Memory:
        """Read a context window by window and return its `Memory`; bounded memory use.

        Text is laid out as the start of a user turn (the chat template's prefix, then
        the text); token ids are read as they are. With `memory`, the new content
        continues that memory (which is not changed): reading a text in several calls
        gives the same memory as one call.
        """
        if isinstance(text_or_token_ids, str):
            if not text_or_token_ids.strip():
                raise ValueError("the context is empty; give a text with some content")
            if memory is None:
                chat = self.layout.chat
                ids = self._encode(self.layout.context(text_or_token_ids), first=True)
            else:
                chat = memory.chat
                ids = self._encode(text_or_token_ids, first=False)
        else:
            chat = memory.chat if memory is not None else False
            ids = [int(i) for i in text_or_token_ids]
        if not ids:
            raise ValueError("the context is empty; give at least one token")
        total = len(ids) + (memory.num_tokens if memory is not None else 0)
        if memory is None:
            ratio = self.choose_ratio(total)
        else:
            ratio = memory.ratio
            self.check_memory(memory)
            if positions_needed(total, self.config.window, ratio or min(self.config.ratios)) > self.max_positions:
                self._too_long(total, ratio or min(self.config.ratios))
        reserve = positions_needed(total, self.config.window, ratio or min(self.config.ratios))
        cache = self.new_cache(memory, reserve=reserve)
        ratio_of = self._ratio_function(ratio)
        input_ids = self._as_ids(ids)
        window = self.config.window
        show = len(ids) > 4 * window if show_progress is None else show_progress
        with tqdm(total=len(ids), desc="memorize", unit="tok", disable=not show) as bar:
            for start in range(0, len(ids), window):
                chunk = input_ids[:, start : start + window]
                self.feed(chunk, cache, ratio_of, keep_hidden=False)
                bar.update(chunk.shape[1])
        keys, values = cache.export()
        return Memory(
            keys=keys,
            values=values,
            state=cache.state,
            identity=self.identity(),
            ratio=ratio,
            chat=chat,
            content_sha256=_chain_hash(memory.content_sha256 if memory is not None else "", ids),
        )

    def _prompt_ids(self, prompt, memory: Memory | None) -> list[int]:
        if not isinstance(prompt, str):
            return [int(i) for i in prompt]
        if not prompt.strip():
            raise ValueError("the prompt is empty; ask something")
        if memory is None:
            return self._encode(self.layout.standalone(prompt), first=True)
        if memory.chat:
            return self._encode(self.layout.continuation(prompt), first=False)
        return self._encode(prompt, first=False)

    def _stop_ids(self) -> list[int]:
        """The ids that end a reply: the one rule shared with the local generator (`memorag.stop_tokens`)."""
        return stop_token_ids(self.tokenizer, self.base_model)

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
        prompt_ids = [self._prompt_ids(prompt, memory) for prompt in prompts]
        if not all(prompt_ids):
            raise ValueError("the prompt is empty")
        ratios = [memory.ratio if memory is not None else self.choose_ratio(len(ids)) for ids in prompt_ids]
        from .decoding import decode

        return decode(self, prompt_ids, memory, ratios, max_new_tokens, do_sample, temperature, top_p, seed, on_token,
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

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True) if self.tokenizer is not None else str(ids)

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
        window is recomputed in the backward pass.
        """
        batch, total = input_ids.shape
        fixed = memory.ratio if memory is not None else (None if self.config.ratio_mix == "step-random"
                                                          else self.choose_ratio(total))
        ratio_of = self._ratio_function(fixed, seed=ratio_seed)
        functional = torch.is_grad_enabled()
        cache = self.new_cache(memory, functional=functional, reserve=0 if functional else total)
        targets = None
        if labels is not None:
            pad = labels.new_full((batch, 1), -100)
            targets = torch.cat([labels[:, 1:], pad], dim=1)  # [B, N]: the label each raw token predicts
        window = self.config.window
        loss_sum = torch.zeros((), device=self.device)
        count = 0
        logits = []
        for start in range(0, total, window):
            ids = input_ids[:, start : start + window]
            piece_targets = targets[:, start : start + window] if targets is not None else None
            if self.gradient_checkpointing and functional and not return_logits:
                piece_loss, piece_count = self._checkpointed_window(ids, piece_targets, cache, ratio_of)
            else:
                hidden = torch.cat(self.feed(ids, cache, ratio_of, keep_hidden=True), 1)
                piece_loss, piece_count, piece_logits = self._score(hidden, piece_targets, return_logits)
                if piece_logits is not None:
                    logits.append(piece_logits)
            loss_sum = loss_sum + piece_loss
            count += piece_count
        loss = loss_sum / max(count, 1) if labels is not None else None
        return MemoryModelOutput(loss=loss, num_loss_tokens=count, logits=torch.cat(logits, 1) if logits else None)

    def _score(self, hidden: torch.Tensor, targets: torch.Tensor | None, return_logits: bool):
        if targets is None and not return_logits:
            return torch.zeros((), device=hidden.device), 0, None
        logits = self.lm_head(self.final_norm(hidden)).float()  # [B, n, V]
        if targets is None:
            return torch.zeros((), device=hidden.device), 0, logits
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum")
        return loss, int((targets != -100).sum()), logits if return_logits else None

    def _checkpointed_window(self, ids, targets, cache: MemoryCache, ratio_of):
        """One window under activation checkpointing: only the cache tensors and the loss are kept."""
        from torch.utils.checkpoint import checkpoint

        num_layers, state = len(self.layers), cache.state

        def window_step(*tensors):
            inner = MemoryCache(num_layers, self._rotate, state=state, keys=list(tensors[:num_layers]),
                                values=list(tensors[num_layers:]), functional=True)
            hidden = torch.cat(self.feed(ids, inner, ratio_of, keep_hidden=True), 1)
            loss, _, _ = self._score(hidden, targets, False)
            return (loss, *inner.keys, *inner.values, inner.state)

        loss, *rest = checkpoint(window_step, *cache.keys, *cache.values, use_reentrant=False)
        cache.keys, cache.values = list(rest[:num_layers]), list(rest[num_layers : 2 * num_layers])
        cache.state = rest[-1]
        count = int((targets != -100).sum()) if targets is not None else 0
        return loss, count


def _chain_hash(previous: str, ids: list[int]) -> str:
    """Content hash of everything read: chained over calls (`previous` is "" at the start)."""
    return hashlib.sha256((previous + json.dumps(ids)).encode()).hexdigest()


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json", "spiece.model")


def _load_tokenizer(path: str):
    """The tokenizer of a model folder or hub id; None for a local folder without tokenizer files."""
    from transformers import AutoTokenizer

    folder = Path(path)
    if folder.is_dir() and not any((folder / file).is_file() for file in TOKENIZER_FILES):
        return None
    return AutoTokenizer.from_pretrained(path)


def _local_folder(path: str) -> Path:
    """The local folder of a model: the path itself, or a hub id's snapshot in the download cache."""
    folder = Path(path)
    if folder.is_dir():
        return folder
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(path, allow_patterns=["*.json", "*.safetensors", "*.bin"]))


@contextmanager
def _quiet_unused_weights(active: bool):
    """Silence transformers' report of the `beacon_*` tensors it does not load (we load them ourselves)."""
    if not active:
        yield
        return
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _display_name(name: str, path: str) -> str:
    from memorag.embedded import EMBEDDED_LM

    return EMBEDDED_LM if path != name and name in ("embedded", EMBEDDED_LM) else name
