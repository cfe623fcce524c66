"""Modes: the ways of answering over a memorized corpus, selectable by name (`--mode`).

Each mode is a `Mode` subclass registered with `@register_mode` (the one place it is
named) in a module of its own; every module of this package is imported on the first
lookup, so `available_modes()` names them all. A mode is handed a
`ModeContext` (`context.py`) with the question's `EvidenceStep` (`evidence.py`), and
imports nothing from `memorag.pipeline`.
"""

from memorag.modes.base import Mode, available_modes, get_mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence import EvidenceStep

__all__ = ["EvidenceStep", "Mode", "ModeContext", "available_modes", "get_mode", "register_mode"]
