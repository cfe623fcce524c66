"""The third stage's objective: DPO on clue sets, the log-probabilities read through the memory.

A clue set is one reply per clue kind (spans, questions, draft), each written by the memory model
after its clue prompt over the memory of the question's context. Its log-probability is the sum,
over the kinds, of the reply's token log-probabilities (its stop token included when it ended on
one). `clue_logprobs` reads the context once into a functional working cache (with gradients, so
they reach the memory parameters through the memory entries the context leaves), then continues
every reply's prompt from a shallow copy of that cache, all replies as one right-padded batch (a
padded row's pads come after its tokens and change none of their scores).

DPO (Rafailov et al., 2023) compares the policy's log-ratio to the reference's on the preferred
(`chosen`) and the other (`rejected`) clue set: `-log sigmoid(beta * ((pc - rc) - (pr - rr)))`,
with `p` the policy's log-probabilities and `r` the reference's (the SFT checkpoint's, recorded in
the pairs file when it was built, so no frozen copy is kept while training).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from memorag.memory.cache import MemoryCache
from memorag.memory.windowed_scoring import read_windows

IGNORE_INDEX = -100


@dataclass(frozen=True)
class TokenizedPair:
    """One preference pair as token ids: the context as memorized, each clue kind's prompt ids, and the
    chosen and rejected replies per kind (each ending with its stop token when it ended on one)."""

    context_ids: tuple[int, ...]
    prompt_ids: tuple[tuple[int, ...], ...]
    chosen_ids: tuple[tuple[int, ...], ...]
    rejected_ids: tuple[tuple[int, ...], ...]
    reference_chosen: float  # the reference's log-probability of the chosen clue set
    reference_rejected: float

    def __len__(self) -> int:
        """Tokens of the longest sequence read: the context, then its longest prompt and reply."""
        branches = [len(p) + len(r) for p, r in zip(self.prompt_ids * 2, self.chosen_ids + self.rejected_ids,
                                                     strict=True)]
        return len(self.context_ids) + max(branches)

    @property
    def reply_tokens(self) -> int:
        return sum(len(ids) for ids in (*self.chosen_ids, *self.rejected_ids))


def branch_rows(prompts: Sequence[Sequence[int]], replies: Sequence[Sequence[int]], pad: int
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each prompt then its reply, right-padded: input ids [B, T] and labels [B, T] (-100 but on the replies)."""
    width = max(len(p) + len(r) for p, r in zip(prompts, replies, strict=True))
    input_ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    labels = torch.full((len(prompts), width), IGNORE_INDEX, dtype=torch.long)
    for row, (prompt, reply) in enumerate(zip(prompts, replies, strict=True)):
        ids = [*prompt, *reply]
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        labels[row, len(prompt) : len(ids)] = torch.tensor(list(reply), dtype=torch.long)
    return input_ids, labels


def clue_logprobs(model, context_ids: torch.Tensor, input_ids: torch.Tensor, labels: torch.Tensor,
                  ratio: int) -> torch.Tensor:
    """The summed log-probability of each row's labelled tokens [B], read after the memory of
    `context_ids` [1, N] at `ratio`: prompts and replies `input_ids` [B, T], `labels` [B, T] (HF
    convention). Gradients (when recorded) reach the memory parameters through the context's memory."""
    ratio_of = model.ratio_function(ratio)
    cache = model.new_cache(None, functional=True)
    read_windows(model, context_ids, lambda hidden, columns: (), cache=cache, ratio_of=ratio_of)
    rows = input_ids.shape[0]
    branches = MemoryCache(cache.num_layers, cache.rotate, state=cache.state,
                           keys=[k.expand(rows, -1, -1, -1) for k in cache.keys],  # [B, H_kv, M, d]
                           values=[v.expand(rows, -1, -1, -1) for v in cache.values], functional=True)
    targets = torch.cat([labels[:, 1:], labels.new_full((rows, 1), IGNORE_INDEX)], dim=1)  # [B, T]

    def per_row(hidden: torch.Tensor, columns: slice) -> tuple[torch.Tensor, ...]:
        window = targets[:, columns]  # [B, n]
        return tuple(model.score_labelled(hidden[row : row + 1], window[row : row + 1])[0] for row in range(rows))

    sums = read_windows(model, input_ids, per_row, cache=branches, ratio_of=ratio_of)
    return -torch.stack(sums)  # [B]: cross-entropy sums -> log-probabilities


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, reference_chosen: torch.Tensor,
             reference_rejected: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DPO's sigmoid loss of the log-probabilities (each [P]): (mean loss [], chosen rewards [P], rejected
    rewards [P]), a reward being `beta` times the policy's log-ratio to the reference."""
    chosen_reward = beta * (policy_chosen - reference_chosen)
    rejected_reward = beta * (policy_rejected - reference_rejected)
    loss = -F.logsigmoid(chosen_reward - rejected_reward).mean()
    return loss, chosen_reward.detach(), rejected_reward.detach()


@dataclass
class PairOutput:
    loss: torch.Tensor  # [] the DPO loss of the pair
    chosen_reward: torch.Tensor  # [] beta * (policy - reference) log-probability of the chosen set (detached)
    rejected_reward: torch.Tensor  # []
    policy_chosen: torch.Tensor  # [] the policy's log-probability of the chosen set (detached)
    policy_rejected: torch.Tensor  # []


def pair_logprobs(model, pair: TokenizedPair, ratio: int, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's log-probabilities of the pair's chosen and rejected clue sets ([] each), from one read
    of the context and one batch of every reply."""
    device = model.device
    kinds = len(pair.prompt_ids)
    input_ids, labels = branch_rows(pair.prompt_ids * 2, pair.chosen_ids + pair.rejected_ids, pad)
    context = torch.tensor([pair.context_ids], dtype=torch.long, device=device)  # [1, N]
    rows = clue_logprobs(model, context, input_ids.to(device), labels.to(device), ratio)  # [2K]
    return rows[:kinds].sum(), rows[kinds:].sum()


def pair_forward(model, pair: TokenizedPair, ratio: int, pad: int, beta: float) -> PairOutput:
    """The DPO loss of one pair under the policy `model`, against the pair's recorded reference."""
    chosen, rejected = pair_logprobs(model, pair, ratio, pad)
    reference = torch.tensor([pair.reference_chosen, pair.reference_rejected], dtype=torch.float32,
                             device=chosen.device)
    loss, chosen_reward, rejected_reward = dpo_loss(chosen[None], rejected[None], reference[:1], reference[1:], beta)
    return PairOutput(loss, chosen_reward[0], rejected_reward[0], chosen.detach(), rejected.detach())
