"""Modes: the ways of answering over a memorized corpus, selectable by name (`--mode`).

Each mode is a `Mode` subclass registered with `@register_mode`, in its own module
listed in `MODE_MODULES`; `available_modes()` names them all.
"""

from memorag.modes.base import MODE_MODULES, Mode, available_modes, get_mode, register_mode

__all__ = ["MODE_MODULES", "Mode", "available_modes", "get_mode", "register_mode"]
