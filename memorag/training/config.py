"""`TrainConfig`: every setting of a training run, defined once.

Both stages use this one dataclass; `stage` says which one a file is for. It is
built with `memorag.config` (dataclass defaults <- YAML <- `key=value`), so
unknown keys are errors, and the resolved config is saved as
`train_config.yaml` in every checkpoint.

    model       base model: `embedded` (SmolLM2-135M-Instruct), a hub id, a local
                folder, or `random:FAMILY` (a randomly initialised model built in
                process from `architecture`); its dtype; gradient checkpointing
    memory      the `MemoryConfig` of the memory model (window, ratios, ...)
    data        training files and how they become batches
    optim       AdamW, schedule, clipping, accumulation, length of the run
    checkpoint  output folder, how often, how many to keep, resume
    logging     JSONL (always), progress bar, wandb
    eval        held-out perplexity in later windows (see `memorag.training.evaluate`)
    loss        the objective: LM loss, distillation from the full-context base, or both
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from memorag.config import NAMED_ENTRIES
from memorag.memory import MemoryConfig
from memorag.runtime.architectures import ARCHITECTURES
from memorag.training.data.packing import PackingSpec

Stage = Literal["pretrain", "sft"]
Precision = Literal["auto", "fp32", "bf16"]
DType = Literal["auto", "float32", "bfloat16", "float16"]
Schedule = Literal["cosine", "linear", "constant"]
WandbMode = Literal["offline", "online", "disabled"]
IfDamaged = Literal["fallback", "refuse"]
LossKind = Literal["lm", "distill", "mix"]
CompileMode = Literal["default", "max-autotune-no-cudagraphs"]
LOSS_KINDS = ("lm", "distill", "mix")


@dataclass
class ModelSection:
    """Which frozen base model the memory is trained on.

    - `base`: `embedded` (the offline SmolLM2-135M-Instruct), a hub id, a local folder,
      or `random:FAMILY` (`random:llama`, `random:qwen2`, ...) for a random model.
    - `architecture`: Hugging Face config fields, or the name of one declared in
      `memorag.runtime.architectures` (`qwen2-7b-instruct`, ...). For `random:` bases, the model's
      dimensions; for other bases, the expected dimensions (checked against the loaded
      config, and used to build the model on the meta device without downloading it).
    - `tokenizer`: None for the base's own; `byte` for a built-in byte-level tokenizer
      (random models); or a hub id / folder.
    - `dtype`: the frozen base weights' dtype; `auto` is bfloat16 under bf16 precision,
      else float32. Memory parameters are always kept in float32.
    - `memory_weights`: start from saved memory weights (stage 2 starts from stage 1).
    - `memory_rank`: 0 trains the full memory projections (copies of the base ones); r > 0
      trains a LoRA update of rank r on each copy instead (peft; `memorag.memory.lowrank`),
      scaled by `memory_alpha / memory_rank` (`memory_alpha` null: scale 1). Saved weights
      record which; low-rank weights are small enough to ship.
    - `compile_windows`: null trains through the eager layers; a torch.compile mode (`default`)
      compiles each decoder layer, attention over the cache left eager between
      (memorag/memory/compiled.py): the first step compiles, later steps run the fused
      kernels (on an H200 a 7B step took 0.92x and a 135M step 0.81x the eager time). How a run
      computes, not what: a resume may change it.
    """

    base: str = "embedded"
    architecture: dict[str, Any] = field(default_factory=dict, metadata={NAMED_ENTRIES: ARCHITECTURES})
    tokenizer: str | None = None
    dtype: DType = "auto"
    init_seed: int = 0
    memory_weights: str | None = None
    gradient_checkpointing: bool = True
    memory_rank: int = 0
    memory_alpha: float | None = None
    compile_windows: CompileMode | None = None

    def __post_init__(self) -> None:
        if self.is_random and not self.random_family:
            raise ValueError(f"model.base={self.base!r}: name the family, e.g. random:llama")
        if self.memory_rank < 0:
            raise ValueError(f"model.memory_rank={self.memory_rank} must be >= 0 (0: full memory projections)")

    @property
    def is_random(self) -> bool:
        return self.base.startswith("random")

    @property
    def random_family(self) -> str:
        return self.base.partition(":")[2].strip() or str(self.architecture.get("model_type", ""))


@dataclass
class DataSection:
    """Training data.

    Pretraining reads `files` (.txt, .jsonl with a `text_field`, .parquet; folders and
    glob patterns expand, sorted) lazily, tokenizes them and packs the token stream into
    sequences of `min_length`..`max_length` tokens (drawn per micro-batch, rounded down
    to a multiple of `length_multiple`; every sequence of a micro-batch has the same
    length). `hf_dataset` streams a `datasets` dataset instead (machines with a hub).
    SFT reads JSONL samples (see `memorag.training.data.sft`) and groups them into batches of
    equal window count; samples longer than `max_length` are skipped.
    `mixture` records the source shares (`kjv`, `wiki`, `essays`, `synthetic`) of a
    pretraining mixture: `train/prepare_mix.py --config FILE` builds `files[0]` from them
    (`memorag.training.data.mixture`); the trainer itself reads `files`.
    """

    files: list[str] = field(default_factory=list)
    hf_dataset: str | None = None
    hf_config: str | None = None
    hf_split: str = "train"
    text_field: str = "text"
    min_length: int = 4096
    max_length: int = 4096
    length_multiple: int = 1
    batch_size: int = 1
    shuffle_files: bool = True
    add_bos: bool = True
    add_eos: bool = True
    read_chars: int = 65536
    system_prompt: str | None = None
    mixture: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.min_length < 2 or self.max_length < self.min_length:
            raise ValueError(f"data.min_length={self.min_length} and max_length={self.max_length} "
                             "must satisfy 2 <= min_length <= max_length")
        if self.length_multiple < 1 or self.length_multiple > self.min_length:
            raise ValueError(f"data.length_multiple={self.length_multiple} must be in 1..min_length")
        if self.batch_size < 1:
            raise ValueError(f"data.batch_size={self.batch_size} must be at least 1")
        if self.read_chars < 1024:
            raise ValueError(f"data.read_chars={self.read_chars} must be at least 1024")

    def packing_spec(self, *, sequences_per_batch: int, seed: int, max_epochs: int | None) -> PackingSpec:
        """How pretraining packs this data: every data knob from here, the run's batch, seed and epochs."""
        return PackingSpec(
            min_length=self.min_length, max_length=self.max_length, length_multiple=self.length_multiple,
            shuffle_files=self.shuffle_files, add_bos=self.add_bos, add_eos=self.add_eos,
            text_field=self.text_field, read_chars=self.read_chars,
            sequences_per_batch=sequences_per_batch, seed=seed, max_epochs=max_epochs,
        )


@dataclass
class OptimSection:
    """AdamW over the memory parameters only, with warmup and a decaying schedule.

    The run lasts `max_steps` optimizer steps; if it is None, `epochs` passes over the
    data (the step count is found by one counting pass). `stop_at_step` ends the process
    early (after a checkpoint) without changing the schedule: for tests and time limits.
    """

    lr: float = 5e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    schedule: Schedule = "cosine"
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0
    grad_accumulation: int = 1
    max_steps: int | None = None
    epochs: int = 1
    stop_at_step: int | None = None

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"optim.lr={self.lr} must be positive")
        if self.grad_accumulation < 1:
            raise ValueError(f"optim.grad_accumulation={self.grad_accumulation} must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"optim.max_steps={self.max_steps} must be positive (or null to use epochs)")
        if self.epochs < 1:
            raise ValueError(f"optim.epochs={self.epochs} must be at least 1")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"optim.min_lr_ratio={self.min_lr_ratio} must be in [0, 1]")
        if self.warmup_steps < 0:
            raise ValueError(f"optim.warmup_steps={self.warmup_steps} must be >= 0")


@dataclass
class CheckpointSection:
    """`output_dir/checkpoint-STEP/` every `every_steps` (and every `every_seconds` of training
    time, when set) and at the end; `latest` names the newest.

    `resume`: `auto` (the newest complete checkpoint in `output_dir`, if any), `none`
    (start fresh; refused if `output_dir` already holds checkpoints) or a checkpoint path.
    A resume compares these settings with the checkpoint's (`memorag.training.resume`): how
    the run is logged, evaluated, saved and stopped may change; what it computes is refused
    unless `resume_with_changes` is true, which applies the new values and records that it did.
    `if_damaged`: when the newest checkpoint has a damaged file, `fallback` resumes from the
    newest intact one (with a warning naming the file; the damaged folder is set aside as
    `checkpoint-STEP.damaged`), `refuse` stops and names the `checkpoint.resume=` to pass.
    A training process also stops cleanly (checkpoint, exit 0) on SIGUSR1/SIGTERM or
    when the file `output_dir/stop_file` appears (the SLURM scripts use it); the stop
    file is removed once honoured.
    `inference_ratio`: the ratio saved memory weights memorize at once loaded for inference
    (null: the one ratio trained, or the largest of a `step-random` mix); recorded in their
    `memory_config.json` beside the settings trained with.
    """

    output_dir: str = "runs/memorag"
    every_steps: int = 500
    every_seconds: float | None = None  # also after this much training time since the last save (a lease's clock)
    keep_last: int = 3
    resume: str = "auto"
    resume_with_changes: bool = False
    if_damaged: IfDamaged = "fallback"
    stop_file: str = "STOP"
    inference_ratio: int | None = None

    def __post_init__(self) -> None:
        if self.every_steps < 1:
            raise ValueError(f"checkpoint.every_steps={self.every_steps} must be at least 1")
        if self.keep_last < 1:
            raise ValueError(f"checkpoint.keep_last={self.keep_last} must be at least 1")


@dataclass
class LoggingSection:
    """`output_dir/train_log.jsonl` always; a progress bar; wandb only when asked (`wandb=true`, which the
    shipped 7B and SmolLM2 configs set), so a run never needs a wandb account or sends anything unasked."""

    every_steps: int = 10
    progress_bar: bool = True
    wandb: bool = False
    wandb_mode: WandbMode = "offline"
    project: str = "memorag"
    run_name: str | None = None

    def __post_init__(self) -> None:
        if self.every_steps < 1:
            raise ValueError(f"logging.every_steps={self.every_steps} must be at least 1")


@dataclass
class EvalSection:
    """Held-out perplexity of the last `score_windows` windows of each held-out sequence.

    The sequences are the first `num_sequences` packed sequences of `seq_length` tokens
    from `files`, read as `data.files` are (its `text_field`, BOS/EOS, `read_chars`),
    in the given file order. Conditions: the memory at each of `ratios`, the window
    alone (no memory) and the full context (when it fits in the model's positions).
    `every_steps` = 0 turns evaluation during training off; `at_start` / `at_end` run it
    before the first and after the last step. `other_text_control` adds, per ratio, the
    same scored windows each read after a same-length memory of another held-out sequence
    (the whole memory swapped), and with the baselines the context gain: (other - own) /
    (no memory - full context), with a bootstrap interval over sequences.
    """

    files: list[str] = field(default_factory=list)
    every_steps: int = 0
    at_start: bool = False
    at_end: bool = True
    ratios: list[int] = field(default_factory=lambda: [2, 4, 8, 16, 32])
    seq_length: int = 4096
    num_sequences: int = 4
    score_windows: int = 1
    baselines: bool = True
    other_text_control: bool = False

    def __post_init__(self) -> None:
        if self.every_steps < 0:
            raise ValueError(f"eval.every_steps={self.every_steps} must be >= 0")
        if self.num_sequences < 1 or self.score_windows < 1:
            raise ValueError("eval.num_sequences and eval.score_windows must be at least 1")
        if any(not isinstance(r, int) or r < 1 for r in self.ratios):
            raise ValueError(f"eval.ratios={self.ratios} must be positive integers")


@dataclass
class LossSection:
    """The training objective (see `memorag.training.objectives` and docs/training.md).

    `kind`: `lm` (the paper's next-token loss on raw tokens), `distill` (KL from the
    frozen base reading the whole sequence to the memory model, on the same tokens) or
    `mix` (`lm + weight * KL`). Distillation needs each sequence to fit in the base
    model's positions and runs in one process.
    """

    kind: LossKind = "lm"
    weight: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in LOSS_KINDS:
            raise ValueError(f"loss.kind={self.kind!r} is not valid; allowed: {', '.join(LOSS_KINDS)}")
        if self.weight < 0:
            raise ValueError(f"loss.weight={self.weight} must be >= 0")


@dataclass
class TrainConfig:
    """One training run (stage 1 `pretrain` or stage 2 `sft`); see the module docstring."""

    stage: Stage = "pretrain"
    seed: int = 42
    precision: Precision = "auto"
    model: ModelSection = field(default_factory=ModelSection)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    data: DataSection = field(default_factory=DataSection)
    optim: OptimSection = field(default_factory=OptimSection)
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    logging: LoggingSection = field(default_factory=LoggingSection)
    eval: EvalSection = field(default_factory=EvalSection)
    loss: LossSection = field(default_factory=LossSection)

    def __post_init__(self) -> None:
        if len(self.memory.ratios) > 1 and self.memory.ratio_mix != "step-random":
            raise ValueError(
                f"memory.ratios={self.memory.ratios} with ratio_mix={self.memory.ratio_mix!r}: training draws "
                "each window's ratio from the list, so set memory.ratio_mix=step-random (or give one ratio)"
            )
        inference = self.checkpoint.inference_ratio
        if inference is not None and (inference < 1 or self.memory.window % inference):
            raise ValueError(f"checkpoint.inference_ratio={inference} must be a positive ratio that divides "
                             f"memory.window={self.memory.window} (e.g. one of memory.ratios)")
        bad = [r for r in self.eval.ratios if self.memory.window % r]
        if bad:
            raise ValueError(f"eval.ratios {bad} do not divide memory.window={self.memory.window}")
        if self.eval.seq_length <= self.eval.score_windows * self.memory.window and self.eval.files:
            raise ValueError(
                f"eval.seq_length={self.eval.seq_length} leaves no context before the "
                f"{self.eval.score_windows} scored window(s) of {self.memory.window} tokens"
            )
