"""A plain causal LM's rows for the one decode loop (`memorag.runtime.decode_loop.DecodeBatch`).

A decode step of a small model on a CPU is bound by reading the weights, and one pass over N tokens
(one per prompt) reads them once, as a pass over one token does (benchmarks/batch_decode_step.py
measures the saving). `LanguageModelRows` keeps the running prompts in the slots of one key/value
buffer per layer and runs our own decoder layer over them (`memorag.memory.plain_decoder`): a prompt
joins between steps (prefilled alone, attending over its own tokens) and leaves between steps. Each
row reads only its own keys at its own positions, so its tokens are those of the prompt decoded
alone, up to the rounding of a matrix product shared by the rows (the tests check equality with
transformers' own decoding on tiny models). Only the families of `memorag.memory.families` decode
so; any other model keeps transformers' `generate`, one sequence at a time. The memory model's rows
are `memorag.memory.decoding.MemoryRows`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from memorag.memory.plain_decoder import PlainDecoder

from .base import GeneratorError


class LanguageModelRows:
    """A supported family's causal LM, its running rows in slots (`KVSlots`): row i is in slot
    `slot_of[i]`, the slots in use always 0..n-1, so a step reads one block of them."""

    def __init__(self, model):
        self.decoder = PlainDecoder(model)
        self.slots = self.decoder.new_slots()
        self.slot_of: list[int] = []  # per row, in the order the rows joined
        self.lengths: list[int] = []  # per slot: the tokens it holds

    def prompt_ids(self, prompt: Sequence[int]) -> Sequence[int]:
        return prompt

    @torch.inference_mode()
    def prefill(self, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> torch.Tensor:
        """Each prompt read alone into a new slot, with room for its reply: their next-token logits [n, V]."""
        if any(not prompt for prompt in prompts):
            raise GeneratorError("a prompt to decode needs at least one token")
        needed = max(len(prompt) + budget for prompt, budget in zip(prompts, max_new_tokens, strict=True))
        self.slots.ensure(len(self.lengths) + len(prompts), max([needed, *self.lengths]))
        logits = []
        for prompt in prompts:
            slot = len(self.lengths)
            logits.append(self.decoder.prefill(self.slots, slot, prompt))
            self.slot_of.append(slot)
            self.lengths.append(len(prompt))
        return torch.stack(logits)

    @torch.inference_mode()
    def remove(self, index: int) -> None:
        """Drop row `index`; the sequence in the last slot moves into its slot."""
        slot, last = self.slot_of.pop(index), len(self.lengths) - 1
        if slot != last:
            self.slots.move(last, slot, self.lengths[last])
            self.slot_of[self.slot_of.index(last)] = slot
            self.lengths[slot] = self.lengths[last]
        self.lengths.pop()

    @torch.inference_mode()
    def decode_step(self, tokens: list[int]) -> torch.Tensor:
        by_slot = [0] * len(self.lengths)
        for row, slot in enumerate(self.slot_of):
            by_slot[slot] = tokens[row]
        if max(self.lengths) + 1 > self.slots.capacity:
            self.slots.ensure(len(self.lengths), max(self.lengths) + 1)
        logits = self.decoder.decode_step(self.slots, by_slot, self.lengths)  # [n, V] in slot order
        self.lengths = [length + 1 for length in self.lengths]
        return logits[self.slot_of]
