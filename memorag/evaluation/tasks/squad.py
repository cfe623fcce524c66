"""Re-exports `memorag.datasets.squad` under its old name (the data sets moved below the harness)."""

from memorag.datasets.squad import *  # noqa: F403
