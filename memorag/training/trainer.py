"""The training loop of every stage: memory parameters only, Accelerate for devices and backends.

What is trained is read through a few methods (`_build_model`, `_trainable_parameters`,
`_load_weights`, `_save_weights`, `_forward`, `_build_data`); the reader stage overrides them to
train a LoRA adapter on the generator instead (`memorag.training.reader_trainer`).

    trainer = Trainer(load_config(TrainConfig, "configs/debug.yaml"))
    summary = trainer.train()

One optimizer step = `optim.grad_accumulation` micro-batches. A micro-batch is this
process's share of a global micro-batch from the data stream (equal-length packed
sequences for pretraining, equal-window-count samples for SFT). Each forward gets a
`ratio_seed` derived from (seed, step, micro-batch, process), so every window's ratio
is drawn from `memory.ratios` reproducibly. The loss of a step is token-weighted
over its micro-batches. Precision: bf16 autocast on GPUs that support it (frozen base
weights in bf16, memory parameters in fp32), fp32 elsewhere.

Exact resume: a checkpoint holds the memory weights, optimizer and scheduler state,
every process's RNG states, the step and the data position; training resumed from
it produces the same losses as an uninterrupted run. Before the model is built, the
inputs are checked and the output folder claimed (`preflight`), and the checkpoint to
resume from is verified and its settings compared with the run's (`resume`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from memorag.config import config_to_dict, save_config
from memorag.memory.checkpoint import load_memory_weights
from memorag.memory.schedule import positions_needed
from memorag.storage.io import atomic_write_text
from memorag.training.data import (
    PackedBatches,
    SFTBatches,
    SFTSpec,
    collate_samples,
    collate_sequences,
    rank_slice,
    render_sample,
)

from . import preflight, resume
from . import run_checkpoints as ckpt
from .build import build_model
from .config import TrainConfig
from .distributed import (
    backend,
    check_activation_checkpointing,
    check_processes,
    configure_deepspeed,
    configure_fsdp,
    full_memory_parameters,
    load_optimizer,
    save_optimizer,
    whole_model_construction,
)
from .errors import TrainingInputError
from .evaluate import ConditionScore, EvalReport, evaluate_heldout, heldout_sequences
from .monitor import RunLogger
from .objectives import objective_forward
from .optim import apply_optim_settings, build_optimizer, build_scheduler
from .schedules import ratio_counts, ratio_seed

logger = logging.getLogger(__name__)
FINAL_DIR = "final"


def use_bf16(precision: str) -> bool:
    if precision == "bf16":
        return True
    if precision == "fp32":
        return False
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


class Trainer:
    """Set up from a `TrainConfig` (checks, model, optimizer, data, resume), then `train()`.

    From construction to the end of `train()` (or `close()`) the main process holds the
    lock of `checkpoint.output_dir`: one run per folder."""

    def __init__(self, cfg: TrainConfig, accelerator=None) -> None:
        from accelerate import Accelerator
        from accelerate.utils import DistributedDataParallelKwargs

        self.cfg = cfg
        self.bf16 = self._use_bf16(cfg.precision)
        self.accelerator = accelerator or Accelerator(
            mixed_precision="bf16" if self.bf16 else "no",
            gradient_accumulation_steps=cfg.optim.grad_accumulation,
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        )
        self._run_lock = contextlib.ExitStack()
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _use_bf16(precision: str) -> bool:
        return use_bf16(precision)

    def close(self) -> None:
        """Let go of the output folder (`train()` does this when it ends)."""
        self._run_lock.close()

    def _setup(self) -> None:
        from accelerate.utils import set_seed

        acc, cfg = self.accelerator, self.cfg
        self.rank, self.world = acc.process_index, acc.num_processes
        check_processes(acc)
        preflight.check_inputs(cfg)
        self.output_dir = Path(cfg.checkpoint.output_dir)
        if acc.is_main_process:
            resolved = preflight.prepare_output_dir(self.output_dir)
            preflight.claim_output_dir(resolved, cfg.checkpoint.stop_file, self._run_lock)
        set_seed(cfg.seed)
        self.resume_dir = self._select_checkpoint()
        self.changes = resume.check_settings(self.resume_dir, cfg) if self.resume_dir is not None else []
        parts = contextlib.ExitStack()  # files written as parts (checkpoint.max_file_mb) are read whole
        self._run_lock.callback(parts.close)
        if self.resume_dir is not None and acc.is_main_process:
            parts.enter_context(ckpt.whole_files(self.resume_dir))
        acc.wait_for_everyone()

        model = self._build_model()
        if self.resume_dir is not None:
            self._load_weights(model, self.resume_dir)
        self.tokenizer = model.tokenizer
        if self.tokenizer is None:
            raise ValueError("training needs a tokenizer; the base model has none")
        self.max_positions = model.max_positions
        optimizer = build_optimizer(self._trainable_parameters(model), cfg.optim)
        self.data = self._build_data()
        self.total_steps = cfg.optim.max_steps or self._count_steps()
        self.scheduler = build_scheduler(optimizer, cfg.optim, lambda: self.total_steps)
        configure_deepspeed(acc, cfg.data.batch_size, cfg.optim.grad_accumulation, cfg.optim.grad_clip,
                            hidden_size=model.base_model.config.hidden_size)
        configure_fsdp(acc, model)
        self.model, self.optimizer = acc.prepare(model, optimizer)
        self.eval_sequences = self._eval_sequences()

        self.step = 0
        self.tokens_seen = 0
        self.elapsed = 0.0
        self.resumes: list[dict[str, Any]] = []  # the changes applied at each resume so far
        if self.resume_dir is not None:
            self._restore(self.resume_dir)
        acc.wait_for_everyone()
        parts.close()
        self.log = RunLogger(
            self.output_dir, acc.is_main_process, resume_step=self.step if self.resume_dir is not None else None,
            wandb_settings=({"project": cfg.logging.project, "name": cfg.logging.run_name, "mode": cfg.logging.wandb_mode}
                            if cfg.logging.wandb else None),
            config=config_to_dict(cfg),
        )
        if self.changes:
            self.log.log({"event": "resume", "step": self.step, "from": str(self.resume_dir),
                          "changes": [change.to_dict() for change in self.changes]})
        self._stop_signal: str | None = None

    def _select_checkpoint(self) -> Path | None:
        """The main process verifies and picks the checkpoint (setting damaged ones aside); all use it."""
        acc, checkpoint = self.accelerator, self.cfg.checkpoint
        chosen = [None]
        if acc.is_main_process:
            chosen = [resume.select_checkpoint(self.output_dir, checkpoint.resume, checkpoint.if_damaged)]
            ckpt.remove_partials(self.output_dir)
        if self.world > 1:
            from accelerate.utils import broadcast_object_list

            broadcast_object_list(chosen)
        acc.wait_for_everyone()
        return chosen[0]

    # -- what is trained (a stage that trains other parameters overrides these) -----------------
    def _build_model(self):
        """The model of the run, its trainable parameters in float32: here the memory model."""
        acc, cfg = self.accelerator, self.cfg
        check_activation_checkpointing(acc, cfg.model.gradient_checkpointing)
        with whole_model_construction(acc):
            model = build_model(cfg.model, cfg.memory, bf16=self.bf16)
        model.gradient_checkpointing = cfg.model.gradient_checkpointing
        if cfg.model.compile_windows is not None:  # memory/compiled.py
            model.compile_windows(mode=None if cfg.model.compile_windows == "default" else cfg.model.compile_windows)
        return model

    def _trainable_parameters(self, model) -> dict[str, torch.nn.Parameter]:
        return model.memory_parameters()

    def _load_weights(self, model, folder: Path) -> None:
        load_memory_weights(model, folder)

    def _save_weights(self, folder: Path) -> None:
        """The trained parameters into `folder` (collective: every process enters; the main one writes)."""
        with full_memory_parameters(self.accelerator, self.model) as model:
            if self.accelerator.is_main_process:
                model.save_memory_weights(folder, self.cfg.checkpoint.inference_ratio)  # creates the folder

    def _window_ratios(self, length: int, seed: int) -> Counter:
        """How many windows of a sequence of `length` tokens ran at each compression ratio."""
        memory = self.cfg.memory
        return ratio_counts(length, memory.window, memory.ratios, memory.ratio_mix, seed)

    # -- setup ------------------------------------------------------------------------------
    @property
    def unwrapped(self):
        return self.accelerator.unwrap_model(self.model)

    def _fits(self, length: int) -> bool:
        return positions_needed(length, self.cfg.memory.window, min(self.cfg.memory.ratios)) <= self.max_positions

    def _build_data(self):
        cfg, data = self.cfg, self.cfg.data
        epochs = None if cfg.optim.max_steps else cfg.optim.epochs
        per_batch = data.batch_size * self.world
        if cfg.stage == "sft":
            spec = SFTSpec(window=cfg.memory.window, sequences_per_batch=per_batch, max_length=data.max_length,
                           seed=cfg.seed, max_epochs=epochs)
            render = lambda sample: render_sample(self.tokenizer, sample, system=data.system_prompt)
            return SFTBatches(data.files, render, spec, fits=self._fits)
        preflight.check_reach(cfg, self.max_positions)
        spec = data.packing_spec(sequences_per_batch=per_batch, seed=cfg.seed, max_epochs=epochs)
        hf = (data.hf_dataset, data.hf_config, data.hf_split) if data.hf_dataset else None
        return PackedBatches(data.files, self._tokenize, spec, self.tokenizer.bos_token_id,
                             self.tokenizer.eos_token_id, hf_dataset=hf)

    def _tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _count_steps(self) -> int:
        """Optimizer steps in `optim.epochs` passes over the data: counted once, then cached in output_dir."""
        acc = self.accelerator
        cache = self.output_dir / "data_count.json"
        key = self._data_key()
        if acc.is_main_process:
            known = json.loads(cache.read_text()) if cache.is_file() else {}
            if known.get("key") != key:
                logger.info("counting the micro-batches of %d epoch(s) (reads the data once)", self.cfg.optim.epochs)
                known = {"key": key, "micro_batches": self.data.count_batches()}
                atomic_write_text(cache, json.dumps(known, indent=1) + "\n")
        acc.wait_for_everyone()
        micro_batches = int(json.loads(cache.read_text())["micro_batches"])
        steps = micro_batches // self.cfg.optim.grad_accumulation
        if steps < 1:
            raise TrainingInputError(
                f"data.files give {micro_batches} micro-batch(es) in optim.epochs={self.cfg.optim.epochs}: not one "
                f"optimizer step of optim.grad_accumulation={self.cfg.optim.grad_accumulation}; add data, or lower "
                "data.min_length or data.batch_size")
        logger.info("%d epoch(s) of data = %d optimizer steps", self.cfg.optim.epochs, steps)
        return steps

    def _data_key(self) -> str:
        """What the count depends on: the files (names, sizes, times), the data settings, the tokenizer."""
        files = [(str(p), p.stat().st_size, int(p.stat().st_mtime)) for p in getattr(self.data, "files", [])]
        described = {"files": files, "data": config_to_dict(self.cfg.data), "window": self.cfg.memory.window,
                     "ratios": self.cfg.memory.ratios, "seed": self.cfg.seed, "epochs": self.cfg.optim.epochs,
                     "world": self.world, "stage": self.cfg.stage, "vocab": len(self.tokenizer),
                     "tokenizer": getattr(self.tokenizer, "name_or_path", "")}
        return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()

    def _eval_sequences(self) -> list[list[int]]:
        return heldout_sequences(self.cfg, self.tokenizer) if self.cfg.eval.files else []

    # -- the loop ------------------------------------------------------------------------------
    def _next_micro_batches(self) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        batches = []
        for _ in range(self.cfg.optim.grad_accumulation):
            try:
                global_batch = next(self.data)
            except StopIteration:
                return None
            share = rank_slice(global_batch, self.rank, self.cfg.data.batch_size)
            if self.cfg.stage != "pretrain":  # samples (clue SFT, reader), padded to the longest
                pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
                batches.append(collate_samples(share, pad))
            else:
                batches.append(collate_sequences(share))
        return batches

    def _forward(self, input_ids: torch.Tensor, labels: torch.Tensor, seed: int):
        """One micro-batch's loss under `loss.kind`: in one plain process `objectives.objective_forward`;
        across processes, or under DeepSpeed (whose engine must run the forward to gather partitioned
        parameters), the wrapped model's forward (lm only). Both read the windows by one loop and
        score them by one hook (memorag/memory/windowed_scoring.py), so their `lm` losses are the same."""
        if self.world == 1 and backend(self.accelerator) != "deepspeed":
            return objective_forward(self.unwrapped, input_ids, labels, self.cfg.loss, ratio_seed=seed)
        if self.cfg.loss.kind != "lm":
            raise ValueError(f"loss.kind={self.cfg.loss.kind} runs in one plain process (no DeepSpeed); use "
                             f"loss.kind=lm to train on {self.world} processes or under DeepSpeed")
        return self.model(input_ids, labels=labels, ratio_seed=seed)

    def _train_step(self, batches) -> dict[str, Any]:
        """One optimizer step over `batches` (CPU tensors). Nothing in it reads a tensor's value on the host:
        the loss weights come from the labels' counts as tensors, and the losses and the gradient norm are
        returned as tensors, read once per logging interval (`_Interval.record`)."""
        acc, cfg = self.accelerator, self.cfg
        accumulation = len(batches)
        counts = [(labels[:, 1:] != -100).sum() for _, labels in batches]  # each [] (int64, CPU)
        total_tokens = torch.stack(counts).sum()  # []
        losses, ratios = [], Counter()
        lr = self.scheduler.get_last_lr()[0]
        for index, (input_ids, labels) in enumerate(batches):
            seed = ratio_seed(cfg.seed, self.step, index, self.rank)
            sync = contextlib.nullcontext() if index == accumulation - 1 else acc.no_sync(self.model)
            with sync:
                with acc.autocast():
                    output = self._forward(input_ids.to(acc.device), labels.to(acc.device), seed)
                weight = ((counts[index] * accumulation).double() / total_tokens.clamp(min=1).double()).float()  # []
                acc.backward(output.loss * weight.to(output.loss.device))
            losses.append(output.loss.detach())
            ratios += self._window_ratios(input_ids.shape[1], seed)
        clip = cfg.optim.grad_clip if cfg.optim.grad_clip > 0 else math.inf
        grad_norm = acc.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"losses": losses, "counts": counts, "tokens": total_tokens, "lr": lr, "ratios": ratios,
                "grad_norm": _as_tensor(grad_norm),
                "raw_tokens": sum(ids.numel() for ids, _ in batches)}

    def train(self) -> dict[str, Any]:
        """Run to `total_steps` (or `optim.stop_at_step`, a stop signal, or the end of the data)."""
        try:
            return self._train()
        finally:
            self.close()

    def _train(self) -> dict[str, Any]:
        acc, cfg = self.accelerator, self.cfg
        from tqdm.auto import tqdm

        self._prepare_run()
        bar = tqdm(total=self.total_steps, initial=self.step, desc=cfg.stage, unit="step",
                   disable=not (acc.is_main_process and cfg.logging.progress_bar))
        interval = _Interval()
        reason = "finished"
        saved_at = self.step if self.resume_dir is not None else None
        saved_elapsed = self.elapsed
        started = time.perf_counter() - self.elapsed
        while self.step < self.total_steps:
            tick = time.perf_counter()
            batches = self._next_micro_batches()
            if batches is None:
                reason = "data exhausted"
                break
            result = self._train_step(batches)
            self.step += 1
            self.tokens_seen += result["raw_tokens"] * self.world
            self.elapsed = time.perf_counter() - started
            interval.add(result, time.perf_counter() - tick)
            bar.update(1)
            if self.step % cfg.logging.every_steps == 0 or self.step == self.total_steps:
                record = interval.record(self.step, self.world, acc)
                bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}")
                self.log.log(record)
                interval = _Interval()
            if cfg.eval.every_steps and self.step % cfg.eval.every_steps == 0 and self.eval_sequences:
                self.evaluate()
            stop = self._stop_requested()
            at_limit = cfg.optim.stop_at_step is not None and self.step >= cfg.optim.stop_at_step
            if (stop or at_limit or self.step % cfg.checkpoint.every_steps == 0 or self.step == self.total_steps
                    or self._checkpoint_due(saved_elapsed)):
                self.save_checkpoint()
                saved_at, saved_elapsed = self.step, self.elapsed
            if stop or at_limit:
                reason = f"stopped ({stop or 'optim.stop_at_step'})"
                if acc.is_main_process:  # honoured: a later run of this output folder goes on
                    (self.output_dir / cfg.checkpoint.stop_file).unlink(missing_ok=True)
                break
        bar.close()
        return self._finish_run(reason, saved_at)

    def _prepare_run(self) -> None:
        """Before the first step: stop signals handled, the output folder and its config written,
        and the evaluation at the start when asked for."""
        cfg = self.cfg
        self._install_signal_handlers()
        if self.accelerator.is_main_process:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            save_config(cfg, self.output_dir / ckpt.TRAIN_CONFIG)
        if cfg.eval.at_start and self.step == 0 and self.eval_sequences:
            self.evaluate()

    def _finish_run(self, reason: str, saved_at: int | None) -> dict[str, Any]:
        """After the last step: the checkpoint of the last step (unless saved), and for a run that
        finished the evaluation at the end and the final weights; the summary, logged."""
        cfg = self.cfg
        if saved_at != self.step:
            self.save_checkpoint()
        finished = reason in ("finished", "data exhausted")
        if finished:
            if cfg.eval.at_end and self.eval_sequences and not (cfg.eval.every_steps and self.step % cfg.eval.every_steps == 0):
                self.evaluate()
            self.save_final()
        summary = {"event": "end", "step": self.step, "reason": reason, "total_steps": self.total_steps,
                   "tokens_seen": self.tokens_seen, "elapsed_s": round(self.elapsed, 2),
                   "checkpoint": str(ckpt.checkpoint_dir(self.output_dir, self.step))}
        self.log.log(summary)
        self.log.close()
        return summary

    # -- stopping -----------------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        def handler(signum, _frame):
            self._stop_signal = signal.Signals(signum).name

        with contextlib.suppress(ValueError):  # not the main thread: no handlers
            for name in ("SIGUSR1", "SIGTERM"):
                if hasattr(signal, name):
                    signal.signal(getattr(signal, name), handler)

    def _checkpoint_due(self, saved_elapsed: float) -> bool:
        """`checkpoint.every_seconds` of training time since the last save, agreed on by every process."""
        every = self.cfg.checkpoint.every_seconds
        if not every:
            return False
        due = self.elapsed - saved_elapsed >= every
        if self.world > 1:
            flag = torch.tensor([1.0 if due else 0.0], device=self.accelerator.device)
            due = float(self.accelerator.reduce(flag, reduction="sum")) > 0
        return due

    def _stop_requested(self) -> str | None:
        """A stop signal or the stop file, agreed on by every process."""
        reason = self._stop_signal
        if reason is None and (self.output_dir / self.cfg.checkpoint.stop_file).exists():
            reason = "stop file"
        if self.world > 1:
            flag = torch.tensor([1.0 if reason else 0.0], device=self.accelerator.device)
            if float(self.accelerator.reduce(flag, reduction="sum")) > 0:
                reason = reason or "stop on another process"
        return reason

    # -- evaluation --------------------------------------------------------------------------------
    def evaluate(self) -> EvalReport:
        """Held-out perplexity (every process scores its share; sums are reduced)."""
        acc, ev = self.accelerator, self.cfg.eval
        shards = self.eval_sequences[self.rank :: self.world]
        rounds = -(-len(self.eval_sequences) // self.world)
        weights = [1] * len(shards) + [0] * (rounds - len(shards))
        shards = shards + [self.eval_sequences[0]] * (rounds - len(shards))
        report = evaluate_heldout(self.unwrapped, shards, ev.ratios, ev.score_windows, ev.baselines,
                                  autocast=acc.autocast, weights=weights, other_text=ev.other_text_control)
        if self.world > 1:
            names = list(report.scores)
            sums = torch.tensor([[report.scores[n].nll_sum, report.scores[n].tokens] for n in names],
                                dtype=torch.float64, device=acc.device)
            sums = acc.reduce(sums, reduction="sum").cpu()
            for name, (nll, tokens) in zip(names, sums.tolist()):
                report.scores[name] = ConditionScore(nll, int(tokens), report.scores[name].note)
            report.per_sequence = {}  # this process's share only: no context-gain interval from it
        report.num_sequences = len(self.eval_sequences)
        report.step = self.step
        if acc.is_main_process:
            print(report.table(), flush=True)
            report.save(self.output_dir / "eval" / f"step-{self.step}.json")
            self.log.log({"event": "eval", **report.to_dict()})
        return report

    # -- checkpoints -------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Write `checkpoint-STEP` atomically (every process takes part)."""
        acc = self.accelerator
        staging = ckpt.staging_dir(self.output_dir, self.step)
        self._save_weights(staging)
        acc.wait_for_everyone()
        save_optimizer(acc, self.model, self.optimizer, self.scheduler, staging)
        ckpt.save_rng(staging, self.rank)
        acc.wait_for_everyone()
        final = ckpt.checkpoint_dir(self.output_dir, self.step)
        if acc.is_main_process:
            save_config(self.cfg, staging / ckpt.TRAIN_CONFIG)
            if self.cfg.checkpoint.max_file_mb is not None:
                ckpt.split_large_files(staging, int(self.cfg.checkpoint.max_file_mb * 10**6))
            ckpt.write_trainer_state(staging, {
                "stage": self.cfg.stage, "step": self.step, "total_steps": self.total_steps,
                "tokens_seen": self.tokens_seen, "elapsed_s": round(self.elapsed, 3), "world_size": self.world,
                "resumes": self.resumes,
            }, self.data.state_dict())
            ckpt.publish(self.output_dir, self.step, self.cfg.checkpoint.keep_last)
            self.log.log({"event": "checkpoint", "step": self.step, "path": str(final)})
        acc.wait_for_everyone()
        return final

    def _restore(self, folder: Path) -> None:
        state = ckpt.read_trainer_state(folder)
        if state.get("stage") != self.cfg.stage:
            raise ckpt.CheckpointError(f"{folder} is a {state.get('stage')} checkpoint, this is a {self.cfg.stage} run")
        load_optimizer(self.accelerator, self.model, self.optimizer, self.scheduler, folder)
        if any(change.key.startswith("optim.") for change in self.changes):
            apply_optim_settings(self.scheduler, self.cfg.optim)
        try:
            self.data.load_state_dict(state["data"])
        except ValueError as error:  # only with checkpoint.resume_with_changes: data settings were compared
            raise TrainingInputError(
                f"{error}. The data position of {folder} cannot carry over to the data as now set; to train on "
                f"other data from its weights, start a new run in another checkpoint.output_dir with "
                f"model.memory_weights={folder}") from None
        self.step = int(state["step"])
        self.resumes = list(state.get("resumes", []))
        if self.changes:
            self.resumes.append({"step": self.step, "from": str(folder),
                                 "changes": [change.to_dict() for change in self.changes]})
        self.tokens_seen = int(state.get("tokens_seen", 0))
        self.elapsed = float(state.get("elapsed_s", 0.0))
        if int(state.get("world_size", 1)) != self.world:
            logger.warning("resuming a %s-process checkpoint on %d processes: data order and RNG differ",
                           state.get("world_size"), self.world)
        if not ckpt.load_rng(folder, self.rank):
            logger.warning("%s holds no RNG state for process %d", folder, self.rank)
        logger.info("resumed from %s at step %d", folder, self.step)

    def save_final(self) -> Path:
        """`output_dir/final`: the memory weights and the training config, for inference."""
        acc = self.accelerator
        final = self.output_dir / FINAL_DIR
        self._save_weights(final)
        if acc.is_main_process:
            save_config(self.cfg, final / ckpt.TRAIN_CONFIG)
            ckpt.share(final)  # the permissions of a checkpoint
        acc.wait_for_everyone()
        return final


class _Interval:
    """What the steps between two log records returned; their tensors are read on the host once, in `record`."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.seconds = 0.0
        self.ratios: Counter = Counter()

    def add(self, result: dict[str, Any], seconds: float) -> None:
        self.steps.append(result)
        self.seconds += seconds
        self.ratios += result["ratios"]

    def record(self, step: int, world: int, accelerator) -> dict[str, Any]:
        losses = torch.stack([loss for result in self.steps for loss in result["losses"]]).tolist()  # one sync
        norms = [result["grad_norm"] for result in self.steps]
        known = [norm for norm in norms if norm is not None]
        read_norms = iter(torch.stack(known).tolist() if known else [])
        grad_norms = [next(read_norms) if norm is not None else math.nan for norm in norms]
        loss_sum, tokens, position = 0.0, 0, 0
        for result in self.steps:  # token-weighted sums, in the order of the micro-batches
            step_sum = 0.0
            for count in result["counts"]:
                step_sum += losses[position] * int(count)
                position += 1
            loss_sum += step_sum
            tokens += int(result["tokens"])
        if world > 1:
            sums = torch.tensor([loss_sum, tokens], dtype=torch.float64, device=accelerator.device)
            loss_sum, tokens = accelerator.reduce(sums, reduction="sum").tolist()
        return {
            "event": "train",
            "step": step,
            "loss": loss_sum / max(tokens, 1),
            "lr": self.steps[-1]["lr"] if self.steps else 0.0,
            "grad_norm": sum(grad_norms) / max(len(grad_norms), 1),
            "tokens_per_s": sum(result["raw_tokens"] for result in self.steps) * world / max(self.seconds, 1e-9),
            "loss_tokens": int(tokens),
            "ratios": {str(ratio): count for ratio, count in sorted(self.ratios.items())},
            **self._metric_means(),
        }

    def _metric_means(self) -> dict[str, float]:
        """The means over the interval of a stage's own per-step figures (`metrics`: name -> [] tensor), one sync."""
        named = [result["metrics"] for result in self.steps if result.get("metrics")]
        if not named:
            return {}
        names = list(named[0])
        means = torch.stack([torch.stack([metrics[name] for metrics in named]).float().mean() for name in names])
        return dict(zip(names, means.tolist(), strict=True))


def _as_tensor(grad_norm) -> torch.Tensor | None:
    """The gradient norm as a tensor read later, once per interval: a tensor from torch's clipping, a
    float from DeepSpeed's (which has read it already), or None where the engine gives none."""
    if grad_norm is None:
        return None
    return grad_norm.detach() if isinstance(grad_norm, torch.Tensor) else torch.tensor(float(grad_norm))
