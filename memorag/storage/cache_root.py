"""The one folder memorag caches in: converted embedded models (`models/`), the saves of documents
asked about by file (`asked/`) and memorag-lite's gist checkpoints (`gists/`).

`$MEMORAG_CACHE` names it; else `$XDG_CACHE_HOME/memorag`, else `~/.cache/memorag`. The older
`$MEMORAG_CACHE_DIR` is still read when `$MEMORAG_CACHE` is not set, with a warning: it now names the
same root (the saves of asked documents move from it to its `asked/` folder, so they are made once again).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

CACHE_VARIABLE = "MEMORAG_CACHE"
DEPRECATED_CACHE_VARIABLE = "MEMORAG_CACHE_DIR"


def cache_home() -> Path:
    """The cache root (see the module's docstring)."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE]).expanduser()
    if os.environ.get(DEPRECATED_CACHE_VARIABLE):
        warnings.warn(f"${DEPRECATED_CACHE_VARIABLE} is deprecated: set ${CACHE_VARIABLE} instead (the one cache "
                      f"root; {DEPRECATED_CACHE_VARIABLE} is read as that root for now)", FutureWarning, stacklevel=2)
        return Path(os.environ[DEPRECATED_CACHE_VARIABLE]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "memorag"
