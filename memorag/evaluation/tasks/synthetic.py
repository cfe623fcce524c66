"""Re-exports `memorag.datasets.synthetic` under its old name (the data sets moved below the harness)."""

from memorag.datasets.synthetic import *  # noqa: F403
