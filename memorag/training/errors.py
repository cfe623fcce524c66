"""The training errors a user can fix: a file, a folder, a setting, a checkpoint.

They are `ConfigError`s, so `train/pretrain.py` and `train/sft.py` print them as one
`error: ...` line and exit with status 2 (`memorag.training.cli`); every other failure
is the code's and keeps its traceback. Each message names the thing and the fix.
"""

from __future__ import annotations

from memorag.config import ConfigError


class TrainingInputError(ConfigError):
    """A run that cannot start or go on because of something the user gave it."""
