"""Re-exports `memorag.datasets.lengths` under its old name (the data sets moved below the harness)."""

from memorag.datasets.lengths import *  # noqa: F403
