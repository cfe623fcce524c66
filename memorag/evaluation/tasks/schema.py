"""Re-exports `memorag.datasets.schema` under its old name (the data sets moved below the harness)."""

from memorag.datasets.schema import *  # noqa: F403
