"""A transformers causal LM on this machine as the generator."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

from memorag.memory.plain_decoder import decodes_plainly
from memorag.runtime.cache_argument import cache_kwargs
from memorag.runtime.decode_loop import DecodeBatch, Request, Sampling, SharedBatch, Stops
from memorag.runtime.stop_tokens import stop_token_ids

from .base import Generator, GeneratorError, PromptTokens
from .batched import LanguageModelRows
from .prefix_cache import PrefixCache, common_prefix_length
from .streaming import TextStream

# Marks the end of a prefix inside a rendered chat template (a private-use character).
_PREFIX_END = "\ue000"


class _StreamerAdapter:
    """transformers' streamer protocol (`put`/`end`) on top of `TextStream`.

    `generate` first puts the prompt ids, then each new token; the prompt is skipped.
    """

    def __init__(self, stream: TextStream):
        self.stream = stream
        self.prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.stream.push(value.reshape(-1).tolist())

    def end(self) -> None:
        pass


class _OpeningBias:
    """The sampling's `opening_bias` as a transformers logits processor: applied to the first new token only."""

    def __init__(self, prompt_length: int, sampling: Sampling):
        self.prompt_length, self.sampling = prompt_length, sampling

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[1] != self.prompt_length:
            return scores
        for token, amount in self.sampling.opening_bias:
            scores[:, token] += amount
        return scores


class LocalGenerator(Generator):
    """Greedy (or sampled) generation through the one decode loop (a model of the memory model's
    families; any other through `model.generate`), through the chat template when the tokenizer has
    one, else the plain prompt (system text first).

    `refusal_margin` (0: none) is subtracted from the score of the first token of `NO_ANSWER_REPLY`, the
    reply a reader trained by `train/reader.py` gives when its evidence lacks the answer, when a reply's
    first token is chosen: the reply is then given only where the model prefers it to every answer by
    that margin (in logits). It is tuned on rows we may tune on, as SQuAD v2 systems tune their
    no-answer threshold (docs/training.md, "The reader").

    `writer` is the same model without the reader adapter, for a reader: it writes the text a pipeline
    reads as memory (`memory_writer`: Lite's gists and clues), the adapter only answers."""

    def __init__(
        self,
        model,
        tokenizer,
        name: str = "",
        *,
        shared: bool = False,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        refusal_margin: float = 0.0,
        writer: LocalGenerator | None = None,
    ):
        if tokenizer is None:
            raise GeneratorError("a local generator needs the model's tokenizer")
        if not 0 < repetition_penalty < float("inf"):
            raise GeneratorError(f"repetition_penalty={repetition_penalty} must be a finite number above 0")
        if not 0 < temperature < float("inf"):
            raise GeneratorError(f"temperature={temperature} must be a finite number above 0 (do_sample=False: greedy)")
        if not 0 < top_p <= 1:
            raise GeneratorError(f"top_p={top_p} must be in (0, 1]")
        if not 0 <= refusal_margin < float("inf"):
            raise GeneratorError(f"refusal_margin={refusal_margin} must be a finite number, 0 or above (0: none)")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name or getattr(model.config, "_name_or_path", "") or model.config.model_type
        self.shared = shared  # the weights belong to the memory model
        self.do_sample, self.temperature, self.top_p = do_sample, temperature, top_p
        self.repetition_penalty = repetition_penalty
        self.refusal_margin = refusal_margin
        self.writer = writer
        self.context_window = getattr(model.config, "max_position_embeddings", None)
        self.prefix_cache = PrefixCache(model)  # see `generate_with_prefix`
        self._prefix_key: tuple[str, str | None] | None = None
        self._prefix_token_ids: list[int] = []
        self.shared_batch: SharedBatch | None = None  # set on a view only (`decoding_through`)

    @classmethod
    def from_memory_model(cls, memory_model, **kwargs) -> LocalGenerator:
        """The memory model's own base model: its attention modules behave as the base's
        when no memory is given, so the weights are shared, never copied."""
        return cls(memory_model.base_model, memory_model.tokenizer, name=memory_model.name, shared=True, **kwargs)

    def decoding_through(self, shared: SharedBatch) -> LocalGenerator:
        """A view of this generator (the same model, tokenizer and settings; this one is not changed) whose
        greedy replies without a cached prefix go to `shared`, a running batch that other callers' prompts
        join (the server's, memorag/serve/batching.py); it must decode as this generator does (its stops,
        its `sampling()`)."""
        view = copy.copy(self)
        view.shared_batch = shared
        return view

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike[str], *, device: str = "auto", dtype: Any = "auto",
                        quantize: str | None = None, **kwargs) -> LocalGenerator:
        """Load a causal LM (the embedded default's names, a local folder or a hub id) on `device`
        ("auto": CUDA when present, else CPU) in `dtype`, or quantized ("4bit", "8bit"; needs CUDA
        and bitsandbytes): see `memorag.runtime.placement`."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from memorag.generation.models import EMBEDDED_LM, is_embedded_lm, resolve_lm
        from memorag.runtime.cpu_dtype import settle_auto_dtype
        from memorag.runtime.placement import Placement

        load_kwargs = Placement.resolve(device, dtype, quantize).lm_kwargs()
        path = resolve_lm(name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = settle_auto_dtype(AutoModelForCausalLM.from_pretrained(path, **load_kwargs), load_kwargs).eval()
        name = EMBEDDED_LM if is_embedded_lm(name_or_path) else os.fspath(name_or_path)
        return cls(model, tokenizer, name=name, **kwargs)

    def _chat_text(self, prompt: str, system: str | None) -> tuple[str, int | None, bool]:
        """The text the model reads for `prompt` (through the chat template when the tokenizer has
        one, else system text first), where `prompt` starts in it (None when the template changed
        it), and whether the tokenizer adds its special tokens (a chat template writes its own)."""
        if getattr(self.tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": prompt}]
            if system:
                messages.insert(0, {"role": "system", "content": system})
            text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            after_system = text.find(system) + len(system) if system and system in text else 0
            start = text.find(prompt, after_system)
            return text, (start if start >= 0 else None), False
        if system:
            return f"{system}\n\n{prompt}\n", len(system) + 2, True
        return f"{prompt}\n", 0, True

    def measure(self, prompt: str, system: str | None = None) -> PromptTokens:
        """`prompt` tokenized once as the model reads it: its ids, and each token's characters in
        `prompt` (from the tokenizer's offsets; a slow tokenizer gives none)."""
        text, start, special = self._chat_text(prompt, system)
        offsets = bool(getattr(self.tokenizer, "is_fast", False)) and start is not None
        encoded = self.tokenizer(text, add_special_tokens=special, return_offsets_mapping=offsets)
        ids = tuple(int(token) for token in encoded["input_ids"])
        if not offsets:
            return PromptTokens(prompt, system, len(ids), ids)
        assert start is not None
        spans = sorted((first - start, last - start) for first, last in encoded["offset_mapping"] if last > first)
        return PromptTokens(prompt, system, len(ids), ids, tuple(first for first, _ in spans),
                            tuple(last for _, last in spans))

    def _input_ids(self, prompt: str, system: str | None) -> torch.Tensor:
        return torch.tensor([self.measure(prompt, system).ids], dtype=torch.long)  # [1, T]

    def count_tokens(self, prompt: str, system: str | None = None) -> int:
        return self.measure(prompt, system).count

    def _stop_ids(self) -> list[int]:
        return stop_token_ids(self.tokenizer, self.model)

    @torch.no_grad()
    def generate(
        self,
        prompt: str,
        *,
        system: str | None = None,
        max_new_tokens: int = 256,
        on_text: Callable[[str], None] | None = None,
    ) -> str:
        return self._generate(self._input_ids(prompt, system), max_new_tokens, on_text)

    @torch.no_grad()
    def generate_measured(
        self,
        measured: PromptTokens,
        *,
        max_new_tokens: int = 256,
        on_text: Callable[[str], None] | None = None,
    ) -> str:
        """The reply to a prompt `measure` gave, from its token ids (no second tokenization)."""
        if measured.ids is None:
            raise GeneratorError("a local generator answers a prompt measured by itself (with its token ids)")
        return self._generate(torch.tensor([measured.ids], dtype=torch.long), max_new_tokens, on_text)

    @torch.no_grad()
    def generate_batch(self, prompts: Sequence[str], *, system: str | None = None,
                       max_new_tokens: int = 256) -> list[str]:
        """The reply to each prompt, equal to `generate`'s (greedy: up to the rounding of matrix products the
        prompts share), the prompts decoded as one batch through the loop (`loop_decodes`; any other model
        one after another): a step reads the weights once for all of them."""
        if not self.loop_decodes or len(prompts) < 2:
            return [self.generate(prompt, system=system, max_new_tokens=max_new_tokens) for prompt in prompts]
        ids = [self._checked_ids(self._input_ids(prompt, system), max_new_tokens)[0].tolist() for prompt in prompts]
        batch = DecodeBatch(LanguageModelRows(self.model), Stops.of(self._stop_ids()), self.sampling())
        replies = batch.run([Request(index, prompt, max_new_tokens) for index, prompt in enumerate(ids)])
        return [self._text(reply) for reply in replies]

    @torch.no_grad()
    def generate_with_prefix(
        self,
        prefix: str,
        rest: str,
        *,
        system: str | None = None,
        max_new_tokens: int = 256,
        on_text: Callable[[str], None] | None = None,
    ) -> str:
        """The reply to `prefix + rest`, equal to `generate`'s, with the prefix's keys and values
        computed once and reused while the next prompts start with the same prefix.

        Only the tokens the whole prompt shares with the prefix are reused (a tokenizer may
        merge the prefix's last characters with the first of `rest`), and at least the
        last prompt token is always run. One prefix is kept: another one replaces it.
        """
        input_ids = self._input_ids(prefix + rest, system)  # [1, T]
        prompt_ids = input_ids[0].tolist()
        shared = min(common_prefix_length(self._prefix_ids(prefix, system), prompt_ids), len(prompt_ids) - 1)
        past = self.prefix_cache.past_for(prompt_ids[:shared]) if shared > 0 else None
        return self._generate(input_ids, max_new_tokens, on_text, past)

    def _prefix_ids(self, prefix: str, system: str | None) -> list[int]:
        """The token ids a prompt starting with `prefix` begins with (as `_input_ids` makes them)."""
        key = (prefix, system)
        if self._prefix_key != key:
            if getattr(self.tokenizer, "chat_template", None):
                messages = [{"role": "user", "content": prefix + _PREFIX_END}]
                if system:
                    messages.insert(0, {"role": "system", "content": system})
                rendered = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
                end = rendered.find(_PREFIX_END)
                if end < 0:
                    raise GeneratorError(
                        f"the chat template of {self.name} changes the prompt's text, so the end of a cached "
                        "prefix cannot be found; use generate() with the whole prompt"
                    )
                ids = self.tokenizer(rendered[:end], add_special_tokens=False)["input_ids"]
            else:
                ids = self.tokenizer(f"{system}\n\n{prefix}" if system else prefix)["input_ids"]
            self._prefix_key, self._prefix_token_ids = key, [int(token) for token in ids]
        return self._prefix_token_ids

    def _generate(self, input_ids: torch.Tensor, max_new_tokens: int, on_text: Callable[[str], None] | None,
                  cache=None) -> str:
        """The reply to `input_ids` [1, T]: through the shared batch of a `decoding_through` view (greedy, no cached
        prefix), else through the one decode loop for a supported family (`loop_decodes`), else one
        sequence through transformers' `generate` (any other model, or a cached prefix)."""
        self._checked_ids(input_ids, max_new_tokens)
        stream = TextStream(self.tokenizer, on_text)
        prompt = input_ids[0].tolist()
        if self.shared_batch is not None and cache is None and not self.do_sample:
            stream.ids = self.shared_batch.decode([prompt], max_new_tokens,
                                                  on_token=lambda token: stream.push([token]))[0]
        elif cache is None and self.loop_decodes:
            batch = DecodeBatch(LanguageModelRows(self.model), Stops.of(self._stop_ids()), self.sampling())
            stream.ids = batch.run([Request(0, prompt, max_new_tokens, on_token=lambda token: stream.push([token]))])[0]
        else:
            stream.ids = self._transformers_generate(input_ids, max_new_tokens, stream, cache)
        return stream.finish().strip()

    def _checked_ids(self, input_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """`input_ids` [1, T], refused where the prompt and its reply exceed the model's window."""
        if self.context_window and input_ids.shape[1] + max_new_tokens > self.context_window:
            raise GeneratorError(
                f"the prompt has {input_ids.shape[1]} tokens; with {max_new_tokens} new tokens it exceeds the "
                f"{self.context_window}-token window of {self.name}"
            )
        return input_ids

    @property
    def memory_writer(self) -> LocalGenerator:
        return self.writer if self.writer is not None else self

    def _text(self, ids: list[int]) -> str:
        stream = TextStream(self.tokenizer, None)
        stream.ids = ids
        return stream.finish().strip()

    @property
    def loop_decodes(self) -> bool:
        """Whether this model decodes through the one loop (memorag/runtime/decode_loop.py) and our own decoder
        layer (memorag/memory/plain_decoder.py): a causal LM of a family the memory model supports
        (memorag/memory/families.py) without a sliding window; any other keeps `generate`."""
        return decodes_plainly(self.model)

    def sampling(self) -> Sampling:
        """How this generator picks tokens, as the loop takes it."""
        return Sampling(self.do_sample, self.temperature, self.top_p, repetition_penalty=self.repetition_penalty,
                        opening_bias=self.opening_bias())

    def opening_bias(self) -> tuple[tuple[int, float], ...]:
        """The refusal margin as the loop applies it: minus the margin on the fixed reply's first token."""
        return ((self.refusal_token(), -float(self.refusal_margin)),) if self.refusal_margin else ()

    def refusal_token(self) -> int:
        """The first token of `NO_ANSWER_REPLY` as this model writes it (as `train/reader.py` trains it). The
        reader's own lower-case "not in the evidence." is not biased: biasing it too scored worse on the
        tuning samples (docs/training.md, "The refusal margin")."""
        from memorag.prompting.answer_check import NO_ANSWER_REPLY

        return int(self.tokenizer(NO_ANSWER_REPLY, add_special_tokens=False)["input_ids"][0])

    def _transformers_generate(self, input_ids: torch.Tensor, max_new_tokens: int, stream: TextStream,
                               cache=None) -> list[int]:
        from transformers import GenerationConfig

        device = next(self.model.parameters()).device
        input_ids = input_ids.to(device)
        stops = self._stop_ids()
        opening = _OpeningBias(input_ids.shape[1], self.sampling())
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=self.do_sample,
            temperature=self.temperature if self.do_sample else None,
            top_p=self.top_p if self.do_sample else None,
            repetition_penalty=self.repetition_penalty,
            eos_token_id=stops or None,
            pad_token_id=stops[0] if stops else None,
        )
        output = self.model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            generation_config=config,
            streamer=_StreamerAdapter(stream),
            logits_processor=[opening] if opening.sampling.opening_bias else None,
            **cache_kwargs(cache),
        )
        return [int(token) for token in output[0, input_ids.shape[1] :] if int(token) not in stops]

    def describe(self) -> dict:
        described = {**super().describe(), "shared_with_memory_model": self.shared}
        if self.writer is not None:
            described["memory_writer"] = self.writer.name
        return {**described, "refusal_margin": self.refusal_margin} if self.refusal_margin else described
