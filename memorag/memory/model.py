"""`MemoryModel`: a frozen decoder patched with memory tokens (docs/memory-model.md), as users call it.

The core (memory/core.py) holds the patched layers, the parameters and the step; this class adds
what a user calls: loading (memory/loading.py), memorizing (memory/memorizing.py), decoding
(memory/decoding.py), the language-model loss and the scoring hook of the training objectives
(memory/windowed_scoring.py), and saving the memory weights (memory/checkpoint.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from memorag.prompting.chat_layout import prompt_ids
from memorag.runtime.decode_loop import Sampling, SharedBatch
from memorag.runtime.stop_tokens import stop_token_ids

from .checkpoint import save_memory_weights
from .config import MemoryConfig
from .core import MemoryCore, plan_steps
from .decoding import decode
from .loading import load_memory_model
from .memorizing import MemoryInProgress
from .schedule import ContextTooLongError
from .state import Memory
from .windowed_scoring import SCORE_CHUNK_ROWS, MemoryModelOutput, language_model_loss, score_labelled

__all__ = ["ContextTooLongError", "MemoryModel", "MemoryModelOutput"]


class MemoryModel(MemoryCore):
    """A frozen causal LM plus memory parameters; see `from_pretrained`."""

    shared_batch: SharedBatch | None = None  # set on a view only (`decoding_through`)

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
        a name (`memorag.memory.checkpoint.memory_weights_for`): "auto", the default, loads the trained
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

    def save_memory_weights(self, directory: str | Path, inference_ratio: int | None = None) -> Path:
        """The memory weights in `directory`; `inference_ratio` is the ratio they memorize at once loaded
        (default: the one ratio trained, or the largest of a step-random mix)."""
        return save_memory_weights(self, directory, inference_ratio)

    # -- tokens ---------------------------------------------------------------------------------
    def prompt_ids(self, prompt, memory: Memory | None = None) -> list[int]:
        """The ids a prompt (text or ids) is read as: continuing `memory`'s layout, or alone (memorag/prompting/chat_layout.py)."""
        return prompt_ids(self.tokenizer, self.layout, prompt, memory.chat if memory is not None else None)

    def stop_ids(self) -> list[int]:
        """The ids that end a reply: the one rule shared with the local generator (`memorag.runtime.stop_tokens`)."""
        return stop_token_ids(self.tokenizer, self.base_model)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True) if self.tokenizer is not None else str(ids)

    # -- public inference ---------------------------------------------------------------------------
    @torch.no_grad()
    def memorize(self, text_or_token_ids, memory: Memory | None = None, show_progress: bool | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> Memory:
        """Read a context window by window and return its `Memory`; bounded memory use.

        Text is laid out as the start of a user turn (the chat template's prefix, then
        the text); token ids are read as they are. With `memory`, the new content
        continues that memory (which is not changed): reading a text in several calls
        gives the same memory as one call. The ids go to the device once; the window loop
        reads no tensor value back (docs/memory-model.md, "Memorizing"). `on_progress(done, total)`
        is called after each window with the tokens read so far and in all.
        """
        pending = MemoryInProgress.start(self, text_or_token_ids, memory)
        window, total = self.config.window, len(pending.ids)
        show = total > 4 * window if show_progress is None else show_progress
        done = 0
        with tqdm(total=total, desc="memorize", unit="tok", disable=not show) as bar:
            for item in plan_steps(pending.input_ids, pending.cache, window, pending.ratio_of):  # one per window
                self.step([item], keep_hidden=False)
                bar.update(item.piece.num_raw)
                done += item.piece.num_raw
                if on_progress is not None:
                    on_progress(done, total)
        return pending.memory(self)

    @torch.no_grad()
    def memorize_batch(self, texts_or_token_ids: Sequence, memory: Memory | None = None, exact: bool = True
                       ) -> list[Memory]:
        """`memorize` for several separate contexts at once (each from nothing, or each continuing
        `memory`): their window pieces are packed along one row axis, one pass over the layers per
        round of pieces, each context attending over its own cache (`MemoryCore.read_tokens_batch`). With `exact`
        (the default) each context's linear layers also round as alone, so every memory equals the one
        `memorize` makes of that context alone."""
        if isinstance(texts_or_token_ids, str) or not texts_or_token_ids:
            raise ValueError("give a list of contexts (texts or token ids), at least one")
        in_progress = [MemoryInProgress.start(self, context, memory) for context in texts_or_token_ids]
        self.read_tokens_batch([pending.input_ids for pending in in_progress],
                               [pending.cache for pending in in_progress],
                               [pending.ratio_of for pending in in_progress], exact=exact)
        return [pending.memory(self) for pending in in_progress]

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
        """Token ids generated after `memory` (unchanged) and `prompt` (text or ids), by the one decode
        loop (memorag/runtime/decode_loop.py, driven by memory/decoding.py): greedy by default; `do_sample` with `temperature` and
        `top_p`, reproducible with `seed` (a `torch.Generator` of its own: the global random state is
        neither read nor changed); `on_token` is called with each new token. Other options, with
        transformers' names and meanings: `top_k`, `repetition_penalty`, `min_new_tokens`, `stop_strings`
        (the reply ends with the token that completes one), `streamer` (the prompts, then each step's
        chosen tokens), and for one prompt `logits_processor` and `stopping_criteria`; any other (beam
        search among them) is refused by name."""
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
        prompt reads the memory and its own tokens as alone (`PackedStepRows`, memory/attention.py); with `exact` (the
        default) its linear layers also round as alone, so greedy replies equal the one-by-one
        ones token for token; `exact=False` shares the matrix products (faster where a lone row's
        kernel is slow; a reply can then differ where two tokens tie). In a sampled batch the i-th
        prompt draws from a generator seeded with `seed + i`, so the first equals its lone call."""
        if isinstance(prompts, str) or not prompts:
            raise ValueError("give a list of prompts (text or token ids), at least one")
        ids_per_prompt = [self.prompt_ids(prompt, memory) for prompt in prompts]
        if not all(ids_per_prompt):
            raise ValueError("the prompt is empty")
        if self.shared_batch is not None and not (do_sample and temperature > 0) and not generate_kwargs:
            return self.shared_batch.decode([(ids, memory) for ids in ids_per_prompt], max_new_tokens, on_token)
        return decode(self, ids_per_prompt, memory, max_new_tokens, Sampling(do_sample, temperature, top_p, seed=seed),
                      on_token, generate_kwargs, exact=exact)

    def decoding_through(self, shared: SharedBatch) -> MemoryModel:
        """A view of this model (the same modules, weights and settings; this one is not changed) whose greedy
        decodings without other options go to `shared`, a running batch that other callers' prompts join
        (the server's, memorag/serve/batching.py); sampled ones, and any with options, run here."""
        view = copy.copy(self)  # a shallow copy: the modules, parameters and buffers are this model's own
        view.shared_batch = shared
        return view

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
        window is recomputed in the backward pass (memory/windowed_scoring.py).
        """
        return language_model_loss(self, input_ids, labels, return_logits, memory, ratio_seed)

    def score_labelled(self, hidden: torch.Tensor, targets: torch.Tensor, teacher_states: torch.Tensor | None = None,
                       chunk_rows: int = SCORE_CHUNK_ROWS) -> tuple[torch.Tensor, torch.Tensor]:
        """The scoring hook for labelled rows: `hidden` [B, n, D] (raw rows from `step`), `targets` [B, n]
        (-100: no label) -> (summed cross-entropy [], summed KL(teacher || model) [], 0 without a teacher).

        `teacher_states` [B, n, D] are a teacher's last hidden states at the same rows, after its final
        norm (the frozen base reading the whole sequence, memorag/training/objectives.py); its logits
        come from this model's head. Rows without a label get no logits at all (most rows of an SFT
        sample; one row's logits cost a quarter of the rest of a small model with a large vocabulary),
        and the labelled rows' logits are computed `chunk_rows` rows at a time (memory/windowed_scoring.py)."""
        return score_labelled(self, hidden, targets, teacher_states, chunk_rows)
