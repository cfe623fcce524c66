"""The limits of `memorag serve`, defined once: what one request may ask of the server.

The defaults are sized for the 2-core machine the project is built on: memorizing runs at
about 300-800 tokens per second there and the embedded memory model reaches about 32K
tokens at ratio 4, so one memorize of 32,768 tokens is about two minutes of work, and no
job should need more than five. Every limit is a `memorag serve` option.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from memorag.documents.options import ReadOptions

MIB = 2**20


@dataclass(frozen=True)
class ServeLimits:
    """Per-request limits; `None` for `job_timeout` means no time limit."""

    max_body_bytes: int = 4 * MIB  # --max-body-mb: checked from Content-Length, and counted while reading
    max_memorize_tokens: int = 32_768  # --max-memorize-tokens: tokens of text one memorize may carry
    max_query_chars: int = 4_000  # --max-query-chars: a query's length, before any model work
    max_json_depth: int = 16  # nesting of the JSON body (the API needs 3)
    job_timeout: float | None = 300.0  # --job-timeout: seconds one job may run before it is cancelled
    read: ReadOptions = field(default_factory=ReadOptions)  # --read-memory-mb, --read-seconds: one upload's reading

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_memorize_tokens", "max_query_chars", "max_json_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServeLimits.{name}={getattr(self, name)} must be at least 1")
        if self.job_timeout is not None and self.job_timeout <= 0:
            raise ValueError(f"ServeLimits.job_timeout={self.job_timeout} must be positive (None: no limit)")

    def describe(self) -> dict[str, int | float | None]:
        """The limits, as `GET /health` reports them (so a client can check its request first)."""
        limits = {name: value for name, value in asdict(self).items() if name != "read"}
        return {**limits, "read_memory_mb": self.read.memory_mb, "read_seconds": self.read.seconds}
