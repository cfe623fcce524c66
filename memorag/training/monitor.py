"""Run logs: `train_log.jsonl` always, wandb when installed and enabled (offline by default).

Every record is one JSON object per line with an `event` (`train`, `eval`, `checkpoint`,
`end`) and the optimizer `step`. On resume, records after the resumed step (left by
the interrupted run) are dropped, so the log reads as one uninterrupted run.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import string
from pathlib import Path
from typing import Any

from memorag.storage.io import atomic_write_text

LOG_FILE = "train_log.jsonl"
WANDB_ID_FILE = "wandb_run_id"
_RUN_ID_ALPHABET = string.ascii_lowercase + string.digits
logger = logging.getLogger(__name__)


class RunLogger:
    def __init__(self, output_dir: str | Path, active: bool, resume_step: int | None = None,
                 wandb_settings: dict[str, Any] | None = None, config: dict[str, Any] | None = None) -> None:
        self.path = Path(output_dir) / LOG_FILE
        self.active = active
        self._wandb = None
        if not active:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = read_log(self.path, up_to_step=resume_step) if resume_step is not None else []
        atomic_write_text(self.path, "".join(json.dumps(record) + "\n" for record in kept))
        if wandb_settings:
            self._wandb = _start_wandb(Path(output_dir), wandb_settings, config or {}, resume_step is not None)

    def log(self, record: dict[str, Any]) -> None:
        if not self.active:
            return
        clean = _finite(record)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(clean) + "\n")
            handle.flush()
        if self._wandb is not None:
            flat = {f"{record.get('event', 'train')}/{key}": value for key, value in _flatten(clean).items()
                    if isinstance(value, int | float) and key != "step"}
            self._wandb.log(flat, step=int(record.get("step", 0)))

    def close(self) -> None:
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def read_log(path: str | Path, up_to_step: int | None = None, event: str | None = None) -> list[dict[str, Any]]:
    """Records of a JSONL log (those with step <= `up_to_step`, of one `event`, when given)."""
    file = Path(path)
    if not file.is_file():
        return []
    records = []
    for line in file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill mid-write
        if up_to_step is not None and int(record.get("step", 0)) > up_to_step:
            continue
        if event is not None and record.get("event") != event:
            continue
        records.append(record)
    return records


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def _start_wandb(output_dir: Path, settings: dict[str, Any], config: dict[str, Any], resuming: bool):
    try:
        import wandb
    except ImportError:
        logger.info("wandb is not installed; logging to %s only", output_dir / LOG_FILE)
        return None
    if settings.get("mode") == "disabled":
        return None
    id_file = output_dir / WANDB_ID_FILE
    run_id = id_file.read_text().strip() if resuming and id_file.is_file() else new_run_id()
    atomic_write_text(id_file, run_id + "\n")
    return wandb.init(project=settings.get("project"), name=settings.get("name"), mode=settings.get("mode", "offline"),
                      dir=str(output_dir), id=run_id, resume="allow", config=config)


def new_run_id(length: int = 8) -> str:
    """A fresh wandb run id (lowercase letters and digits, as wandb makes them).

    Made here because wandb's own helper (`wandb.util.generate_id`) is not part of its
    public API and is gone from current releases.
    """
    return "".join(secrets.choice(_RUN_ID_ALPHABET) for _ in range(length))
