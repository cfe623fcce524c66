"""Re-exports `memorag.datasets.filler` under its old name (the data sets moved below the harness)."""

from memorag.datasets.filler import *  # noqa: F403
