"""Re-exports `memorag.datasets.assembly` under its old name (the data sets moved below the harness)."""

from memorag.datasets.assembly import *  # noqa: F403
