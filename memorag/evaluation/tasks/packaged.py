"""Re-exports `memorag.datasets.packaged` under its old name (the data sets moved below the harness)."""

from memorag.datasets.packaged import *  # noqa: F403
