"""The third stage (RLGF): the memory parameters trained by DPO on recorded preference pairs of clue sets.

    trainer = RLGFTrainer(load_config(TrainConfig, "configs/debug-rlgf.yaml"))
    summary = trainer.train()

The loop, checkpoints, exact resume, refusals and logs are the `Trainer`'s, and so is what is
trained: the memory model's memory parameters (`MemoryCore.memory_parameters()`, saved as memory
weights, so `final/` loads wherever SFT's does). What differs is the data and the objective: a
micro-batch is one pair of `train/build_rlgf_pairs.py` (`memorag.training.rlgf_pairs`), its loss
DPO's against the reference log-probabilities recorded in it (`memorag.training.rlgf_objective`).

The pairs are refused when they were not built for this run: their reference must be the memory
weights this run starts from (`model.memory_weights`, compared by hash before a resume loads
anything), their ratio the one of `memory.ratios`, their questions from the tuning rows and among those
of `rlgf.*` (whose contexts, built again at the start, must give the ids the memory read: the pair's
content hash); and a resume over a pairs file that changed (its sha256) is refused. It trains in one
process, or in several side by side with DDP (`torchrun --nproc_per_node N`; tested over gloo on a CPU):
each takes its own pair of every micro-batch of N pairs, and their gradients are averaged before the
step, so N processes with `optim.grad_accumulation` G train on the pairs one process with N * G would
(docs/training.md: two processes of one thread train 1.21x the pairs an hour of one of two threads on a
2-core CPU).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch

from memorag.memory.memorizing import chain_hash
from memorag.prompting.chat_layout import context_ids

from .data import SFTSpec
from .data.collate import rank_slice
from .errors import TrainingInputError
from .reader_trainer import ReaderBatches
from .rlgf_objective import TokenizedPair, pair_forward
from .rlgf_pairs import check_tuning, pad_id, question_contexts
from .trainer import Trainer

PAIR_FIELDS = ("id", "context_sha256", "prompt_ids", "chosen", "rejected", "reference", "ratio")


def checked_pair(record: Any, where: str, reference_sha256: str, ratio: int, memory_weights: str | None
                 ) -> dict[str, Any]:
    """`record` once it is a pair of train/build_rlgf_pairs.py from the tuning rows, sampled at `ratio`, whose
    reference is the memory weights of hash `reference_sha256` (those of `memory_weights`, named in the error)."""
    if not isinstance(record, dict) or any(name not in record for name in PAIR_FIELDS):
        raise TrainingInputError(f"{where}: not a preference pair of train/build_rlgf_pairs.py (fields: "
                                 f"{', '.join(PAIR_FIELDS)})")
    check_tuning(str(record.get("task", "")), record, where)
    built_with = record["reference"].get("memory_weights_sha256")
    if built_with != reference_sha256:
        raise TrainingInputError(
            f"{where}: the pair's reference log-probabilities come from memory weights {str(built_with)[:12]}..., "
            f"this run starts from {reference_sha256[:12]}... (model.memory_weights={memory_weights}); build the "
            "pairs from the weights the run starts from")
    if record["ratio"] != ratio:
        raise TrainingInputError(f"{where}: the pair was sampled at ratio {record['ratio']}, this run reads "
                                 f"memory.ratios=[{ratio}]")
    return record


def render_pair(tokenizer, layout, record: dict[str, Any], context: str) -> TokenizedPair:
    """The token ids of a checked pair: its `context` laid out as the memory read it (refused when it gives other
    ids than the pair's content hash), the prompts and the chosen and rejected replies as the memory wrote them."""
    ids, _ = context_ids(tokenizer, layout, context, None)
    if chain_hash("", ids) != record["context_sha256"]:
        raise TrainingInputError(f"the context of pair {record.get('id')} tokenizes to other ids than the memory "
                                 "read when the pair was built (another tokenizer, layout or context build)")
    rows = [tuple(tuple(int(i) for i in reply) for reply in record[side]["reply_ids"]) for side in ("chosen", "rejected")]
    prompts = tuple(tuple(int(i) for i in prompt) for prompt in record["prompt_ids"])
    return TokenizedPair(tuple(ids), prompts, rows[0], rows[1], float(record["reference"]["chosen"]),
                         float(record["reference"]["rejected"]))


class PairBatches(ReaderBatches):
    """Preference pairs in SFT's resumable, seeded batches (one pair each), the files' sha256 in the data
    position (`ReaderBatches`), so a resume over a pairs file that changed is refused."""


class RLGFTrainer(Trainer):
    """The `Trainer` over recorded preference pairs with the DPO loss: see the module docstring."""

    def _build_model(self):
        from .distributed import backend

        if backend(self.accelerator) != "plain":
            raise TrainingInputError("stage rlgf trains in one process or with DDP (no DeepSpeed or FSDP): launch "
                                     "with configs/accelerate/cpu.yaml, single_gpu.yaml or multi_gpu_ddp.yaml")
        model = super()._build_model()
        self.reference_sha256 = model.memory_weights_hash()  # before a resume loads its weights
        self.ratio = self.cfg.memory.ratios[0]
        self.pad = pad_id(model.tokenizer)
        self.layout = model.layout  # how a context is laid out: the pairs' contexts are checked against it
        return model

    def _build_data(self) -> PairBatches:
        cfg = self.cfg
        spec = SFTSpec(window=cfg.memory.window, sequences_per_batch=self.world, max_length=cfg.data.max_length,
                       seed=cfg.seed, max_epochs=None if cfg.optim.max_steps else cfg.optim.epochs,
                       same_windows=False)  # each process reads its own pair: the pairs keep one process's order
        self.contexts = question_contexts(cfg, self.tokenizer)
        batches = PairBatches(cfg.data.files, self._render, spec, fits=self._fits, parse=self._parse)
        self._render(batches.sample(0))  # a pairs file of another run is refused before any step
        return batches

    def _parse(self, record: Any, where: str) -> dict[str, Any]:
        return checked_pair(record, where, self.reference_sha256, self.ratio, self.cfg.model.memory_weights)

    def _render(self, record: dict[str, Any]) -> TokenizedPair:
        context = self.contexts.get(record["id"])
        if context is None:
            settings = self.cfg.rlgf
            raise TrainingInputError(
                f"pair {record['id']} is not a question of this run's rlgf.* (hotpotqa={settings.hotpotqa}, "
                f"squad={settings.squad}, context_tokens={settings.context_tokens}, seed={self.cfg.seed}): train with "
                "the settings the pairs were built with (their OUT.stats.json)")
        return render_pair(self.tokenizer, self.layout, record, context)

    def _next_micro_batches(self) -> list[list[TokenizedPair]] | None:
        batches = []
        for _ in range(self.cfg.optim.grad_accumulation):
            try:
                batches.append(rank_slice(next(self.data), self.rank, 1))  # this process's pair of the world's
            except StopIteration:
                return None
        return batches

    def _train_step(self, batches: list[list[TokenizedPair]]) -> dict[str, Any]:
        """One optimizer step over the pairs of `batches`: the mean DPO loss, and the rewards logged beside it."""
        acc, beta = self.accelerator, self.cfg.rlgf.beta
        pairs = [pair for batch in batches for pair in batch]
        lr = self.scheduler.get_last_lr()[0]
        losses, rewards = [], []
        for pair in pairs:
            with acc.autocast():
                output = pair_forward(self.unwrapped, pair, self.ratio, self.pad, beta)
            acc.backward(output.loss * (len(batches) / len(pairs)))  # accelerate divides by the accumulation
            losses.append(output.loss.detach())
            rewards.append(torch.stack([output.chosen_reward, output.rejected_reward]))
        reward = torch.stack(rewards)  # [P, 2]: chosen, rejected
        if self.world > 1:
            self._average_gradients()
            reward = acc.gather(reward)  # every process's pairs
        clip = self.cfg.optim.grad_clip if self.cfg.optim.grad_clip > 0 else math.inf
        grad_norm = acc.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        window = self.cfg.memory.window
        return {"losses": losses, "counts": [torch.tensor(1)] * len(pairs), "tokens": torch.tensor(len(pairs)),
                "lr": lr, "grad_norm": grad_norm.detach() if isinstance(grad_norm, torch.Tensor) else None,
                "ratios": Counter({self.ratio: sum(-(-len(pair.context_ids) // window) for pair in pairs)}),
                "raw_tokens": sum(len(pair.context_ids) + pair.reply_tokens for pair in pairs),
                "metrics": {"reward_chosen": reward[:, 0].mean(), "reward_rejected": reward[:, 1].mean(),
                            "reward_accuracy": (reward[:, 0] > reward[:, 1]).float().mean(),
                            "reward_margin": (reward[:, 0] - reward[:, 1]).mean()}}

    def _average_gradients(self) -> None:
        """The memory parameters' gradients averaged over the processes, as one tensor. The pairs run through the
        unwrapped model (a pair is several reads of the memory, not one forward of DDP's wrapper), so DDP's own
        hooks do not average them."""
        parameters = [parameter for parameter in self.unwrapped.memory_parameters().values() if parameter.requires_grad]
        for parameter in parameters:  # one process's pairs may leave a parameter untouched: its share is zero
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
        grads = [parameter.grad for parameter in parameters]
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        torch.distributed.all_reduce(flat)
        flat /= self.world
        for grad, part in zip(grads, flat.split([grad.numel() for grad in grads]), strict=True):
            grad.copy_(part.view_as(grad))
