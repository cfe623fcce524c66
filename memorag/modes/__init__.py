"""Modes: the ways of answering over a memorized corpus, selectable by name (`--mode`).

Each mode is a `Mode` subclass registered with `@register_mode`, in its own module
listed in `MODE_MODULES`; `available_modes()` names them all. A mode is handed a
`ModeContext` (`context.py`) with the question's `EvidenceStep` (`evidence.py`), and
imports nothing from `memorag.pipeline`.
"""

from memorag.modes.base import MODE_MODULES, Mode, available_modes, get_mode, register_mode
from memorag.modes.context import ModeContext
from memorag.modes.evidence import EvidenceStep

__all__ = ["MODE_MODULES", "EvidenceStep", "Mode", "ModeContext", "available_modes", "get_mode", "register_mode"]
