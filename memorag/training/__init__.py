"""Training the memory model: config, loop, checkpoints, schedules, logs, held-out evaluation.

The recipe (stages, objectives, data, resume, the held-out check) is described in docs/training.md.
"""

from .build import build_model, byte_tokenizer
from .config import TrainConfig
from .evaluate import EvalReport, evaluate_heldout
from .trainer import Trainer

__all__ = ["EvalReport", "TrainConfig", "Trainer", "build_model", "byte_tokenizer", "evaluate_heldout"]
