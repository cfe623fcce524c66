import pytest

from memorag.memory import MemoryConfig


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"attention": "sliding"}, "full-coverage, step-expansion, segmentation"),
        ({"ratio_mix": "random"}, "fixed, step-random, adaptive"),
        ({"memory_params": "qk"}, "qkv, qkvo"),
        ({"attn_implementation": "flash"}, "sdpa, eager, flash_attention_2"),
        ({"ratios": [3]}, "does not divide window"),
        ({"ratios": []}, "empty"),
        ({"ratios": [2, 4]}, "exactly one ratio"),
        ({"window": 0}, "positive integer"),
    ],
)
def test_invalid_values_are_rejected_with_the_allowed_values(settings, message):
    with pytest.raises(ValueError, match=message):
        MemoryConfig(**settings)


def test_round_trip_and_unknown_keys():
    config = MemoryConfig(window=512, ratios=[2, 8], ratio_mix="step-random", attention="segmentation")
    assert MemoryConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown MemoryConfig keys"):
        MemoryConfig.from_dict({**config.to_dict(), "windw": 3})
