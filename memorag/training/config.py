"""`TrainConfig`: every setting of a training run, defined once.

Every stage uses this one dataclass; `stage` says which one a file is for: the memory
model's three (`pretrain`, `sft`, and `rlgf`: clues trained by the answers they lead to,
`memorag.training.rlgf_trainer`, which also reads `rlgf`), or the reader (`reader`: a LoRA adapter on the generator,
`memorag.training.reader_trainer`), which reads `model` (its base), `adapter`, `data`, `optim`,
`checkpoint` and `logging`, and refuses settings of the memory sections it does not read. It is
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
    adapter     the reader's LoRA adapter: rank, scale, dropout, the projections it wraps
    rlgf        the third stage: how its preference pairs are built, and the DPO objective
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from memorag.config import NAMED_ENTRIES
from memorag.memory import MemoryConfig
from memorag.runtime.architectures import ARCHITECTURES
from memorag.training.data.packing import PackingSpec

Stage = Literal["pretrain", "sft", "reader", "rlgf"]
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
    """Which frozen base model the memory is trained on, and how its memory parameters are built."""

    base: str = "embedded"
    """The frozen base model: `embedded` (the offline SmolLM2-135M-Instruct), a hub id, a local folder, or
    `random:FAMILY` (`random:llama`, `random:qwen2`, ...) for a randomly initialised model."""
    architecture: dict[str, Any] = field(default_factory=dict, metadata={NAMED_ENTRIES: ARCHITECTURES})
    """Hugging Face config fields, or the name of one in `memorag.runtime.architectures` (`qwen2-7b-instruct`,
    ...): a `random:` base's dimensions, else the expected ones (checked against the loaded config, and used
    to build the model on the meta device without downloading it)."""
    tokenizer: str | None = None
    """Only for `random:` bases: null or `byte` for a built-in byte-level tokenizer, or a hub id / folder; a
    pretrained base uses its own."""
    dtype: DType = "auto"
    """The frozen base weights' dtype; `auto` is bfloat16 under bf16 precision, else float32 (memory parameters
    always stay float32)."""
    init_seed: int = 0
    """Seed of the random initialisation of a `random:` base."""
    memory_weights: str | None = None
    """Saved memory weights to start from (stage 2 starts from stage 1's); null starts from copies of the base
    projections."""
    gradient_checkpointing: bool = True
    """Recompute each window's activations in the backward pass instead of keeping them: less memory, more time
    (not under DeepSpeed ZeRO-3)."""
    memory_rank: int = 0
    """0 trains the full memory projections; r > 0 trains a LoRA update of rank r on each copy instead (small
    enough to ship)."""
    memory_alpha: float | None = None
    """The LoRA scale numerator: updates are scaled by `memory_alpha / memory_rank` (null: scale 1)."""
    compile_windows: CompileMode | None = None
    """Null trains through the eager layers; a torch.compile mode (`default`) compiles each decoder layer (the
    first step compiles; a resume may change it)."""

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
    """Training data and how it becomes batches.

    Pretraining reads `files` lazily, tokenizes them and packs the token stream into sequences of
    `min_length`..`max_length` tokens (drawn per micro-batch; every sequence of a micro-batch has the same
    length). SFT reads JSONL samples (see `memorag.training.data.sft`) and groups them into batches of
    equal window count; samples longer than `max_length` are skipped.
    """

    files: list[str] = field(default_factory=list)
    """Training files: .txt, .jsonl (with `text_field`) or .parquet for pretraining, JSONL samples for SFT;
    folders and glob patterns expand, sorted."""
    hf_dataset: str | None = None
    """A `datasets` dataset to stream instead of `files` (needs access to the hub)."""
    hf_config: str | None = None
    """The configuration name of `hf_dataset`, if it has several."""
    hf_split: str = "train"
    """The split of `hf_dataset` to stream."""
    text_field: str = "text"
    """The field holding the text in .jsonl, .parquet and `hf_dataset` rows."""
    min_length: int = 4096
    """Shortest packed sequence, in tokens."""
    max_length: int = 4096
    """Longest packed sequence, in tokens (SFT skips longer samples)."""
    length_multiple: int = 1
    """Each micro-batch's drawn length is rounded down to a multiple of this."""
    batch_size: int = 1
    """Sequences per micro-batch on each process."""
    shuffle_files: bool = True
    """Read the files in a seeded random order each epoch (else in the given order)."""
    add_bos: bool = True
    """Put the tokenizer's BOS token before each document."""
    add_eos: bool = True
    """Put the tokenizer's EOS token after each document."""
    read_chars: int = 65536
    """Characters read from a text file at a time (bounds the memory a long file takes)."""
    system_prompt: str | None = None
    """SFT only: the system message of samples that do not give their own."""
    mixture: dict[str, float] = field(default_factory=dict)
    """Source shares (`kjv`, `wiki`, `essays`, `synthetic`) of a pretraining mixture, which
    `train/prepare_mix.py --config FILE` builds into `files[0]`; the trainer reads `files`."""

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
    """AdamW over the memory parameters only, with warmup and a decaying schedule."""

    lr: float = 5e-5
    """Peak learning rate."""
    weight_decay: float = 0.0
    """AdamW's decoupled weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's moment decay rates."""
    eps: float = 1e-8
    """AdamW's denominator epsilon."""
    schedule: Schedule = "cosine"
    """The learning-rate decay after warmup: `cosine`, `linear` or `constant`."""
    warmup_steps: int = 0
    """Optimizer steps of linear warmup up to `lr`."""
    min_lr_ratio: float = 0.0
    """The learning rate the schedule decays to, as a share of `lr`."""
    grad_clip: float = 1.0
    """Clip the gradients' global norm to this."""
    grad_accumulation: int = 1
    """Micro-batches per optimizer step."""
    max_steps: int | None = None
    """Optimizer steps of the run; null runs `epochs` passes over the data (counted by one pass first)."""
    epochs: int = 1
    """Passes over the data when `max_steps` is null."""
    stop_at_step: int | None = None
    """End the process at this step, after a checkpoint, without changing the schedule (for tests and time
    limits)."""

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
    """Checkpoints `output_dir/checkpoint-STEP/`, and resuming from them.

    A resume compares these settings with the checkpoint's (`memorag.training.resume`): how the run is
    logged, evaluated, saved and stopped may change; what it computes is refused unless
    `resume_with_changes` is true. A training process also stops cleanly (checkpoint, exit 0) on
    SIGUSR1/SIGTERM or when `output_dir/stop_file` appears (the SLURM scripts use it).
    """

    output_dir: str = "runs/memorag"
    """The run's folder: checkpoints, `train_log.jsonl`, and `latest` naming the newest checkpoint."""
    every_steps: int = 500
    """Save a checkpoint every this many optimizer steps (and at the end)."""
    every_seconds: float | None = None
    """Also save after this much training time since the last save; null: by steps only."""
    keep_last: int = 3
    """How many checkpoints to keep; older ones are removed."""
    resume: str = "auto"
    """`auto` (the newest complete checkpoint in `output_dir`, if any), `none` (start fresh; refused if
    `output_dir` holds checkpoints) or a checkpoint path."""
    resume_with_changes: bool = False
    """Let a resume change settings that change what is computed (applied and recorded)."""
    if_damaged: IfDamaged = "fallback"
    """When the newest checkpoint has a damaged file: `fallback` resumes from the newest intact one (with a
    warning), `refuse` stops and names the `checkpoint.resume=` to pass."""
    stop_file: str = "STOP"
    """A file name in `output_dir` whose appearance stops the run cleanly; removed once honoured."""
    inference_ratio: int | None = None
    """The ratio saved memory weights memorize at once loaded for inference (null: the ratio trained, or the
    largest of a `step-random` mix)."""
    max_file_mb: float | None = None
    """Write each checkpoint file larger than this many megabytes (10^6 bytes) as numbered parts
    (`NAME.part-000`, ...), so the run's checkpoints fit a repository that caps file sizes; a resume joins
    them. Null: whole files. The final weights (`final/`) are always whole."""

    def __post_init__(self) -> None:
        if self.every_steps < 1:
            raise ValueError(f"checkpoint.every_steps={self.every_steps} must be at least 1")
        if self.max_file_mb is not None and not self.max_file_mb > 0:
            raise ValueError(f"checkpoint.max_file_mb={self.max_file_mb} must be above 0 (or null: whole files)")
        if self.keep_last < 1:
            raise ValueError(f"checkpoint.keep_last={self.keep_last} must be at least 1")


@dataclass
class LoggingSection:
    """`output_dir/train_log.jsonl` always; a progress bar; wandb only when asked (`wandb=true`, which the
    shipped 7B and SmolLM2 configs set), so a run never needs a wandb account or sends anything unasked."""

    every_steps: int = 10
    """Write a log line every this many optimizer steps."""
    progress_bar: bool = True
    """Show a progress bar on the main process."""
    wandb: bool = False
    """Also log to Weights & Biases."""
    wandb_mode: WandbMode = "offline"
    """wandb's mode: `offline` (files to sync later), `online` or `disabled`."""
    project: str = "memorag"
    """The wandb project name."""
    run_name: str | None = None
    """The wandb run name; null lets wandb choose."""

    def __post_init__(self) -> None:
        if self.every_steps < 1:
            raise ValueError(f"logging.every_steps={self.every_steps} must be at least 1")


@dataclass
class EvalSection:
    """Held-out perplexity of the last `score_windows` windows of each held-out sequence.

    The sequences are the first `num_sequences` packed sequences of `seq_length` tokens from `files`, read
    as `data.files` are (its `text_field`, BOS/EOS, `read_chars`), in the given file order.
    """

    files: list[str] = field(default_factory=list)
    """Held-out files; none turns held-out evaluation off."""
    every_steps: int = 0
    """Evaluate every this many optimizer steps; 0 turns evaluation during training off."""
    at_start: bool = False
    """Evaluate before the first step."""
    at_end: bool = True
    """Evaluate after the last step."""
    ratios: list[int] = field(default_factory=lambda: [2, 4, 8, 16, 32])
    """Compression ratios to score the memory at; each must divide `memory.window`."""
    seq_length: int = 4096
    """Tokens per held-out sequence; must leave context before the scored windows."""
    num_sequences: int = 4
    """How many held-out sequences to score."""
    score_windows: int = 1
    """How many final windows of each sequence are scored."""
    baselines: bool = True
    """Also score the window alone (no memory) and the full context (when it fits in the model's positions)."""
    other_text_control: bool = False
    """Also score each window after a same-length memory of another held-out sequence, giving the context gain
    (other - own) / (no memory - full context) with a bootstrap interval."""

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

    Distillation needs each sequence to fit in the base model's positions and runs in one process.
    """

    kind: LossKind = "lm"
    """`lm` (the paper's next-token loss on raw tokens), `distill` (KL from the frozen base reading the whole
    sequence) or `mix` (`lm + weight * KL`)."""
    weight: float = 1.0
    """The KL term's weight under `mix`."""

    def __post_init__(self) -> None:
        if self.kind not in LOSS_KINDS:
            raise ValueError(f"loss.kind={self.kind!r} is not valid; allowed: {', '.join(LOSS_KINDS)}")
        if self.weight < 0:
            raise ValueError(f"loss.weight={self.weight} must be >= 0")


@dataclass
class AdapterSection:
    """The reader's LoRA adapter (peft) on the generator's frozen base: trained, saved and shipped alone."""

    rank: int = 8
    """The rank of each low-rank update."""
    alpha: float = 16.0
    """The scale numerator: updates are scaled by `alpha / rank`."""
    dropout: float = 0.0
    """Dropout on the adapter's input while training (0: none, and no random draws)."""
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    """The base's linear layers (module names) that get an adapter: the attention projections by default; the MLP's
    (gate_proj, up_proj, down_proj) too adapt every linear layer of a block."""
    layers: list[int] | None = None
    """The decoder layers (indices) whose projections get an adapter; null: every layer. The backward pass
    stops at the lowest one, so adapting the top layers only costs less per step."""
    init_from: str | None = None
    """A saved adapter folder (an earlier run's `final/` or `checkpoint-N/`, of the same projections and layers)
    whose weights the run starts from instead of peft's initialisation: a second run that continues a first on
    other samples. One of a higher rank is first brought to `rank` by a truncated SVD of each update (a smaller
    adapter that starts close to the larger one); a lower rank is refused. A resume loads its checkpoint's
    weights over it."""

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"adapter.rank={self.rank} must be at least 1")
        if self.alpha <= 0:
            raise ValueError(f"adapter.alpha={self.alpha} must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"adapter.dropout={self.dropout} must be in [0, 1)")
        if not self.target_modules:
            raise ValueError("adapter.target_modules is empty: name the projections to adapt, e.g. [q_proj, v_proj]")
        if self.layers is not None and (not self.layers or any(index < 0 for index in self.layers)):
            raise ValueError(f"adapter.layers={self.layers} must be null (every layer) or layer indices >= 0")


@dataclass
class RLGFSection:
    """The third stage (docs/training.md, "RLGF"): preference pairs of clue sets, then DPO on them.

    `train/build_rlgf_pairs.py` builds the pairs into `data.files[0]` from these settings and the
    memory model of `model.*` and `memory.*` (the SFT checkpoint): per tuning question, the context
    memorized once, `samples` clue sets sampled, each scored by the reader's answer F1 and the gold
    sentences it found beyond the query's own hits. `train/rlgf.py` then reads `beta`."""

    hotpotqa: int = 1000
    """Questions from HotpotQA dev rows 0..4,999 (the tuning rows; rows 5,000 and above are never read)."""
    squad: int = 0
    """Questions drawn from the SQuAD v2 dev articles of the first half of the file (the tuning articles); the
    unanswerable ones among them are left out."""
    context_tokens: int = 4096
    """Each question's long context, in tokens of the memory model's tokenizer."""
    samples: int = 4
    """Clue sets sampled per question (one reply per clue kind each), decoded as one batch."""
    temperature: float = 1.0
    """Sampling temperature of the clue sets."""
    top_p: float = 0.95
    """Nucleus sampling's probability mass."""
    answer_weight: float = 1.0
    """Weight of the reader's answer F1 (0..1) in a clue set's score."""
    recall_weight: float = 1.0
    """Weight of the share of gold sentences its evidence holds that the query's own hits missed (0..1)."""
    margin: float = 0.1
    """Pairs whose best and worst scores differ by less are dropped (an equal pair always is)."""
    pipeline: dict[str, Any] = field(default_factory=dict)
    """`PipelineConfig` settings of the retrieval and the reader that score the clues (generator,
    embedder, evidence rule, ...), over the harness's CPU ones; the memory model is `model.*`'s."""
    beta: float = 0.1
    """DPO's inverse temperature: how far the policy's log-ratios are pushed from the reference's."""

    def __post_init__(self) -> None:
        if self.hotpotqa < 0 or self.squad < 0 or self.hotpotqa + self.squad < 1:
            raise ValueError(f"rlgf.hotpotqa={self.hotpotqa} and rlgf.squad={self.squad}: ask for at least one question")
        if self.samples < 2:
            raise ValueError(f"rlgf.samples={self.samples} must be at least 2 (a pair needs two clue sets)")
        if self.temperature <= 0 or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"rlgf.temperature={self.temperature} must be > 0 and rlgf.top_p={self.top_p} in (0, 1]")
        if self.answer_weight < 0 or self.recall_weight < 0 or self.answer_weight + self.recall_weight <= 0:
            raise ValueError("rlgf.answer_weight and rlgf.recall_weight must be >= 0, not both 0")
        if self.margin < 0 or self.beta <= 0:
            raise ValueError(f"rlgf.margin={self.margin} must be >= 0 and rlgf.beta={self.beta} > 0")
        unread = sorted(set(self.pipeline) & {"memory_model", "memory_weights", "memory"})
        if unread:
            raise ValueError(f"rlgf.pipeline.{unread[0]}: the memory model that writes the clues is the one of "
                             "model.* and memory.* (the weights the stage trains); remove it")
        from memorag.config import ConfigError, config_from_dict
        from memorag.pipeline.types import PipelineConfig

        try:  # unknown keys and bad values are refused here, not when the pairs are built
            config_from_dict(PipelineConfig, dict(self.pipeline))
        except ConfigError as error:
            raise ValueError(f"rlgf.pipeline: {error}") from None


@dataclass
class TrainConfig:
    """One training run (stage 1 `pretrain`, stage 2 `sft`, stage 3 `rlgf`, or the `reader`); see the module
    docstring."""

    stage: Stage = "pretrain"
    """Which stage the file is for: `pretrain` (train/pretrain.py), `sft` (train/sft.py), `rlgf` (train/rlgf.py)
    or `reader` (train/reader.py)."""
    seed: int = 42
    """Seed of data order, packing and per-window ratio draws."""
    precision: Precision = "auto"
    """`bf16` autocasts to bfloat16, `fp32` does not; `auto` is bf16 on a GPU that supports it."""
    model: ModelSection = field(default_factory=ModelSection)
    """The frozen base model and the memory's parameters (`model.*`)."""
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    """The memory model's settings (`memory.*`, `MemoryConfig`)."""
    data: DataSection = field(default_factory=DataSection)
    """Training data and batching (`data.*`)."""
    optim: OptimSection = field(default_factory=OptimSection)
    """Optimizer, schedule and run length (`optim.*`)."""
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    """Checkpoints and resuming (`checkpoint.*`)."""
    logging: LoggingSection = field(default_factory=LoggingSection)
    """Logs and progress (`logging.*`)."""
    eval: EvalSection = field(default_factory=EvalSection)
    """Held-out evaluation (`eval.*`)."""
    loss: LossSection = field(default_factory=LossSection)
    """The training objective (`loss.*`)."""
    adapter: AdapterSection = field(default_factory=AdapterSection)
    """The reader's LoRA adapter (`adapter.*`; stage `reader` only)."""
    rlgf: RLGFSection = field(default_factory=RLGFSection)
    """The third stage's pairs and objective (`rlgf.*`; stage `rlgf` only)."""

    def __post_init__(self) -> None:
        if self.stage == "reader":
            self._check_reader()
        if self.stage == "rlgf":
            self._check_rlgf()
        elif self.rlgf != RLGFSection():
            raise ValueError(f"stage {self.stage} does not read rlgf.* (the third stage's settings); remove them")
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

    def _check_reader(self) -> None:
        """The reader trains an adapter on the generator with the LM loss on replies; the memory model's
        settings do not apply to it and are refused rather than ignored."""
        model = self.model
        unread = {"model.memory_weights": (model.memory_weights, None), "model.memory_rank": (model.memory_rank, 0),
                  "model.memory_alpha": (model.memory_alpha, None), "model.compile_windows": (model.compile_windows, None),
                  "loss.kind": (self.loss.kind, "lm"), "eval.files": (self.eval.files, [])}
        set_keys = [key for key, (value, default) in unread.items() if value != default]
        if set_keys:
            raise ValueError(f"stage reader does not read {', '.join(set_keys)} (memory-model settings); remove them: "
                             "the reader trains a LoRA adapter (adapter.*) with the LM loss on its replies")

    def _check_rlgf(self) -> None:
        """RLGF scores clues at the ratio they are read at, one pair per micro-batch, with DPO; the settings of
        other objectives and of batching are refused rather than ignored."""
        if len(self.memory.ratios) != 1:
            raise ValueError(f"stage rlgf: memory.ratios={self.memory.ratios}: give the one ratio the memory is "
                             "read at for inference (clues are sampled, scored and trained at it), with "
                             "memory.ratio_mix=fixed")
        unread = {"loss.kind": (self.loss.kind, "lm"), "data.batch_size": (self.data.batch_size, 1),
                  "eval.files": (self.eval.files, [])}
        set_keys = [key for key, (value, default) in unread.items() if value != default]
        if set_keys:
            raise ValueError(f"stage rlgf does not read {', '.join(set_keys)}; remove them: it trains one preference "
                             "pair per micro-batch (optim.grad_accumulation gathers more) with the DPO loss (rlgf.beta)")
