"""The Lite memory's settings: the `lite` section of `PipelineConfig` (`--set lite.window_tokens=...`)."""

from __future__ import annotations

from dataclasses import dataclass

from memorag.config import ConfigError


@dataclass
class GistSettings:
    """How the memorag-lite mode's gists are written.

    `window_tokens`: tokens of text (the memory model's tokenizer) each gist is written from (the
    reference's 4,096); `max_new_tokens`: the most tokens a gist may take (the reference's 512),
    lowered so that all gists fit the generator's positions; `min_gist_tokens`: below this share a
    gist says too little, and the text is refused; `batch_size`: gists written at once (a local model
    decodes them as one batch, each step reading the weights once for all; an endpoint answers them
    concurrently), and checkpointed together; `checkpoint_dir`: where written gists are
    kept until the corpus holds them (None: `gists/` under the cache root, `$MEMORAG_CACHE`, default ~/.cache/memorag/gists).
    """

    window_tokens: int = 4096
    max_new_tokens: int = 512
    min_gist_tokens: int = 32
    batch_size: int = 8
    checkpoint_dir: str | None = None

    def __post_init__(self) -> None:
        for name in ("window_tokens", "max_new_tokens", "min_gist_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"lite.{name}={getattr(self, name)} must be at least 1")
        if self.min_gist_tokens > self.max_new_tokens:
            raise ConfigError(f"lite.min_gist_tokens={self.min_gist_tokens} exceeds lite.max_new_tokens="
                              f"{self.max_new_tokens}")
