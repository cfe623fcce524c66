"""What the scripts in train/ run: parse `--config FILE key=value ...`, then train or evaluate."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from memorag.config import ConfigError, config_from_argv, format_config_help, load_config

from .config import TrainConfig

SCRIPTS = {"pretrain": "train/pretrain.py", "sft": "train/sft.py", "reader": "train/reader.py", "rlgf": "train/rlgf.py"}


def train_parser(stage: str, description: str | None = None) -> argparse.ArgumentParser:
    """The parser of `train/pretrain.py`, `train/sft.py`, `train/reader.py` or `train/rlgf.py`: a usage line,
    the script's docstring (what it does, with examples) as the description, and every setting as the epilog."""
    script = SCRIPTS[stage]
    parser = argparse.ArgumentParser(
        prog=script, usage=f"[accelerate launch ...] {script} --config FILE [key=value ...]",
        description=description, epilog=format_config_help(TrainConfig),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", metavar="FILE", help="a YAML file of settings (configs/pretrain/*.yaml, "
                                                         "configs/sft/*.yaml, configs/reader/*.yaml, configs/rlgf/*.yaml, "
                                                         "configs/debug*.yaml)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="settings over the file's, dotted for sections (the list below)")
    return parser


def _config(argv: Sequence[str] | None, stage: str, description: str | None) -> TrainConfig:
    options = train_parser(stage, description).parse_intermixed_args(argv)
    cfg = load_config(TrainConfig, options.config, options.overrides)
    if cfg.stage != stage:
        other = SCRIPTS.get(cfg.stage, "train/pretrain.py")
        raise ConfigError(f"this config is for stage {cfg.stage!r}; run it with {other} (or set stage={stage})")
    return cfg


def train_main(stage: str, argv: Sequence[str] | None = None, description: str | None = None) -> int:
    """Train one stage; prints the run summary as JSON. Returns the exit status: 2, with one
    `error: ...` line, for what the user can fix (`ConfigError`, `memorag.training.errors`).
    `description` is the calling script's docstring, shown by `--help`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = _config(argv, stage, description)
        if stage == "reader":
            from .reader_trainer import ReaderTrainer as Trainer
        elif stage == "rlgf":
            from .rlgf_trainer import RLGFTrainer as Trainer
        else:
            from .trainer import Trainer

        trainer = Trainer(cfg)
        summary = trainer.train()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if trainer.accelerator.is_main_process:
        print(json.dumps(summary), flush=True)
    return 0


def evaluate_main(argv: Sequence[str] | None = None) -> int:
    """Held-out evaluation of `model.memory_weights` (or the untrained memory) under a training config."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = list(sys.argv[1:] if argv is None else argv)
    out = None
    if "--out" in args:
        index = args.index("--out")
        if index + 1 >= len(args):
            print("error: --out needs a file path", file=sys.stderr)
            return 2
        out = args[index + 1]
        del args[index : index + 2]
    if any(a in ("-h", "--help") for a in args):
        print("usage: python train/evaluate.py --config FILE [--out FILE] [key=value ...]\n"
              "Scores eval.files under eval.* with model.memory_weights (a checkpoint\n"
              "folder, or null for the untrained memory). The TrainConfig keys follow.\n")
    try:
        return _evaluate(config_from_argv(TrainConfig, args), out)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _evaluate(cfg: TrainConfig, out: str | None) -> int:
    import contextlib

    import torch

    from .build import build_model
    from .evaluate import evaluate_heldout, heldout_sequences
    from .preflight import check_files, check_memory_weights
    from .trainer import use_bf16

    check_files("eval.files", cfg.eval.files)
    check_memory_weights(cfg)
    bf16 = use_bf16(cfg.precision)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(cfg.model, cfg.memory, bf16=bf16, device=device if device == "cuda" else None)
    sequences = heldout_sequences(cfg, model.tokenizer)
    autocast = (lambda: torch.autocast(device, dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    ev = cfg.eval
    report = evaluate_heldout(model, sequences, ev.ratios, ev.score_windows, ev.baselines, autocast=autocast,
                              other_text=ev.other_text_control, show_progress=True)
    print(report.table())
    if out:
        report.save(out, memory_weights=cfg.model.memory_weights, precision="bf16" if bf16 else "fp32",
                    device=device)
        print(f"wrote {out}")
    return 0
