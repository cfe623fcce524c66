"""What each memory token may see, checked through its keys in the second layer.

In a 2-layer model, memory entry i's second-layer key is a function of the first-layer
attention of memory token i, so it changes exactly when a raw token it sees changes.
"""

import pytest
import torch

from .conftest import random_ids, tiny_memory_model

WINDOW, RATIO = 16, 4


def _second_layer_entries(model, ids):
    memory = model.memorize(ids)
    return memory.keys[1][0, :, : memory.num_entries]  # [H_kv, entries, d]


def _visible(attention: str, entry: int, raw: int) -> bool:
    last = (entry + 1) * RATIO - 1
    if attention == "segmentation":
        return last - RATIO < raw <= last
    return raw <= last


@pytest.mark.parametrize("attention", ["full-coverage", "step-expansion", "segmentation"])
def test_memory_tokens_see_exactly_their_raw_tokens(attention):
    model = tiny_memory_model("llama", window=WINDOW, ratios=[RATIO], attention=attention)
    ids = random_ids(WINDOW)[0].tolist()
    reference = _second_layer_entries(model, ids)
    for raw in range(WINDOW):
        changed_ids = list(ids)
        changed_ids[raw] = 2 + (ids[raw] - 1) % 90  # another token
        entries = _second_layer_entries(model, changed_ids)
        for entry in range(WINDOW // RATIO):
            moved = (entries[:, entry] - reference[:, entry]).abs().max().item()
            if _visible(attention, entry, raw):
                assert moved > 1e-4, (attention, entry, raw)
            else:
                assert moved == 0.0, (attention, entry, raw)


def test_full_coverage_memory_tokens_see_earlier_memory_tokens_of_their_window():
    """Only full-coverage lets memory token i attend to memory tokens < i of its window.

    Perturbing the memory key projection changes every memory token's first-layer key
    equally, which a token that sees only itself among memory tokens cannot tell
    apart from a change of its own key; comparing schemes shows the difference.
    """
    ids = random_ids(WINDOW)[0].tolist()
    results = {}
    for attention in ("full-coverage", "step-expansion"):
        model = tiny_memory_model("llama", window=WINDOW, ratios=[RATIO], attention=attention)
        results[attention] = _second_layer_entries(model, ids)
    # the first memory token sees no earlier memory token: both schemes agree on it
    assert (results["full-coverage"][:, 0] - results["step-expansion"][:, 0]).abs().max() < 1e-6
    assert (results["full-coverage"][:, 3] - results["step-expansion"][:, 3]).abs().max() > 1e-4


@pytest.mark.parametrize("attention", ["full-coverage", "step-expansion", "segmentation"])
def test_raw_tokens_see_their_window_memory_tokens_only_under_full_coverage(attention):
    """Changing the memory embedding moves raw rows after the window's first memory token
    under full-coverage (raw rows see earlier memory rows of their window) and never
    moves a raw row of the first window under the other schemes; no raw row before the
    first memory token ever moves."""
    ids = random_ids(WINDOW)
    logits = []
    for shift in (0.0, 0.5):
        model = tiny_memory_model("llama", window=WINDOW, ratios=[RATIO], attention=attention)
        with torch.no_grad():
            model.memory_embedding.add_(shift)
            logits.append(model(ids, return_logits=True).logits[0])
    moved = (logits[1] - logits[0]).abs().amax(-1)  # [WINDOW]
    assert moved[:RATIO].max() == 0.0
    if attention == "full-coverage":
        assert (moved[RATIO:] > 1e-4).all()
    else:
        assert moved.max() == 0.0
