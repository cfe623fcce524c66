"""`MemoryConfig`: every knob of the memory model, defined once.

Saved beside every set of memory weights and inside every saved `Memory`, so a
memory made under one setting is never silently read under another.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

RatioMix = Literal["fixed", "step-random", "adaptive"]
AttentionScheme = Literal["full-coverage", "step-expansion", "segmentation"]
MemoryParams = Literal["qkv", "qkvo"]
AttnImplementation = Literal["sdpa", "eager", "flash_attention_2"]

RATIO_MIXES: tuple[str, ...] = ("fixed", "step-random", "adaptive")
ATTENTION_SCHEMES: tuple[str, ...] = ("full-coverage", "step-expansion", "segmentation")
MEMORY_PARAMS: tuple[str, ...] = ("qkv", "qkvo")
ATTN_IMPLEMENTATIONS: tuple[str, ...] = ("sdpa", "eager", "flash_attention_2")
EMBED_INITS: tuple[str, ...] = ("eos", "bos")


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"MemoryConfig.{name}={value!r} is not valid; allowed values: {', '.join(allowed)}")


@dataclass
class MemoryConfig:
    """Settings of the memory ("beacon") model; see docs/memory-model.md.

    Each setting's description is the string under it (the settings tables of `--help` and the
    docs read them from there).
    """

    window: int = 1024
    """Raw tokens per window (`L`); every ratio must divide it."""
    ratios: list[int] = field(default_factory=lambda: [4])
    """Compression ratios (`r`): one memory token after every `r` raw tokens."""
    ratio_mix: RatioMix = "fixed"
    """How a window picks its ratio: `fixed` (the one ratio), `step-random` (drawn per window, seeded by
    `seed` and the window index) or `adaptive` (the smallest ratio whose reach covers the whole context)."""
    attention: AttentionScheme = "full-coverage"
    """Which window rows a memory token attends to (`full-coverage` is plain causal)."""
    memory_params: MemoryParams = "qkv"
    """Which attention projections the memory tokens own: `qkv`, or `qkvo` with the output projection too."""
    attn_implementation: AttnImplementation = "sdpa"
    """The attention kernel: `sdpa`, `eager` or `flash_attention_2`."""
    embed_init: Literal["eos", "bos"] = "eos"
    """The special token whose embedding initialises the memory token's embedding."""
    seed: int = 42
    """Seed of the `step-random` ratio draws when none is given (training passes one per step, from the
    run's `seed`)."""

    def __post_init__(self) -> None:
        _check_choice("ratio_mix", self.ratio_mix, RATIO_MIXES)
        _check_choice("attention", self.attention, ATTENTION_SCHEMES)
        _check_choice("memory_params", self.memory_params, MEMORY_PARAMS)
        _check_choice("attn_implementation", self.attn_implementation, ATTN_IMPLEMENTATIONS)
        _check_choice("embed_init", self.embed_init, EMBED_INITS)
        if not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"MemoryConfig.window={self.window!r} must be a positive integer")
        if isinstance(self.ratios, int):
            self.ratios = [self.ratios]
        self.ratios = list(self.ratios)
        if not self.ratios:
            raise ValueError("MemoryConfig.ratios is empty; give at least one ratio, e.g. [4]")
        for ratio in self.ratios:
            if not isinstance(ratio, int) or ratio < 1:
                raise ValueError(f"MemoryConfig.ratios={self.ratios} must hold positive integers")
            if self.window % ratio:
                raise ValueError(
                    f"MemoryConfig.ratios={self.ratios}: ratio {ratio} does not divide window={self.window}; "
                    "choose ratios that divide the window (e.g. powers of two)"
                )
        if len(set(self.ratios)) != len(self.ratios):
            raise ValueError(f"MemoryConfig.ratios={self.ratios} has duplicates")
        if self.ratio_mix == "fixed" and len(self.ratios) != 1:
            raise ValueError(
                f"MemoryConfig.ratio_mix='fixed' takes exactly one ratio, got ratios={self.ratios}; "
                "use 'step-random' or 'adaptive' for a list"
            )

    @property
    def trains_output_projection(self) -> bool:
        return self.memory_params == "qkvo"

    def for_inference(self, ratio: int | None = None) -> MemoryConfig:
        """These settings as saved weights memorize with: at `ratio` when given; a `step-random` mix
        (a training device) at its largest ratio; `fixed` and `adaptive` as they are."""
        if ratio is None and self.ratio_mix != "step-random":
            return self
        chosen = max(self.ratios) if ratio is None else ratio
        return MemoryConfig.from_dict({**self.to_dict(), "ratios": [chosen], "ratio_mix": "fixed"})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryConfig:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown MemoryConfig keys {unknown}; valid keys: {sorted(known)}")
        return cls(**data)
