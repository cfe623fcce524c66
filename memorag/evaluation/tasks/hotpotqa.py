"""Re-exports `memorag.datasets.hotpotqa` under its old name (the data sets moved below the harness)."""

from memorag.datasets.hotpotqa import *  # noqa: F403
