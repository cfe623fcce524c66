"""Memorizing pays no per-window overheads beyond the layers' own work (docs/memory-model.md, "Memorizing").

The CPU proxies of what a GPU pays per memorized window: no tensor value read on the host (each read
waits for the device), no per-window tensor built from Python data (a host-to-device copy each), the
aten operators dispatched per window and per layer-window held under recorded budgets (each is a
kernel launch or a bookkeeping call on a GPU), and the attention calls per layer.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from memorag.memory.schedule import WindowPiece, compaction_rows, piece_mask, raw_memory_rows
from tests.host_reads import count_reads, project_reads

from .conftest import CountOps, random_ids, tiny_memory_model

WINDOW = 16
SCHEMES = ("full-coverage", "step-expansion", "segmentation")

# aten operators per memorized window, steady state, of the tiny Llama of conftest.py (2 layers, window
# 16, ratio 4, fp32, CPU, no autograd), counted below with a TorchDispatchMode as the difference between
# memorizing 7 and 3 windows, divided by 4: 273, 274 and 274 under the three schemes, 115 per layer-window
# (the layers' own norms, projections, RoPE, attention and MLP; the rest of a window is a fixed 43).
# Work added per window fails here.
OPS_PER_WINDOW_BUDGET = {"full-coverage": 273, "step-expansion": 274, "segmentation": 274}
OPS_PER_LAYER_WINDOW_BUDGET = 115


def _ops_per_window(model, run) -> Counter:
    """Operators per window in steady state: `run(windows)` for 7 windows less for 3, divided by 4."""
    run(model, 2)  # warm-up: lazy initialisations, the tables built once
    with torch.no_grad(), CountOps() as short:
        run(model, 3)
    with torch.no_grad(), CountOps() as long:
        run(model, 7)
    difference = long.counts.copy()
    difference.subtract(short.counts)
    return Counter({name: count / 4 for name, count in difference.items() if count})


def _memorize(model, windows: int) -> None:
    model.memorize(random_ids(WINDOW * windows, seed=windows)[0].tolist(), show_progress=False)


def _model(scheme: str, layers: int = 2):
    return tiny_memory_model("llama", window=WINDOW, ratios=[4], attention=scheme,
                             base_overrides={"num_hidden_layers": layers})


@pytest.mark.parametrize("scheme", SCHEMES)
def test_memorizing_reads_no_tensor_value_on_the_host(monkeypatch, scheme):
    model = _model(scheme)
    ids = random_ids(5 * WINDOW + 3)[0].tolist()  # five windows compacted and a partial one
    with monkeypatch.context() as patch:
        seen = count_reads(patch)
        first = model.memorize(ids[:-20], show_progress=True)
    # a fresh model hashes its memory weights once (the memory's identity), one read per parameter
    # however many windows it reads; nothing else of ours reads a value
    parameters = len(model.memory_parameters())
    assert project_reads(seen) == {("numpy", "memory/state.py"): parameters}
    with monkeypatch.context() as patch:
        seen = count_reads(patch)
        model.memorize(ids, show_progress=True)
        model.memorize(ids[-20:], memory=first, show_progress=False)  # continuing a memory
    assert project_reads(seen) == {}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_operators_per_memorized_window_stay_within_the_budget(scheme):
    ops = _ops_per_window(_model(scheme), _memorize)
    total = sum(ops.values())
    print(f"{scheme}: {total:.0f} aten operators per window")
    assert total <= OPS_PER_WINDOW_BUDGET[scheme]
    # nothing is built from Python data per window: the schedule's tensors come from the tables
    assert ops["aten.lift_fresh"] == 0 and ops["aten._to_copy"] <= 2  # the rotation's fp32 round trip
    # one fused attention call per layer over [memory | window] (memory/attention.py, `sdpa`)
    assert ops["aten._scaled_dot_product_flash_attention_for_cpu"] == 2


def test_operators_per_layer_window_stay_within_the_budget():
    two, three = (sum(_ops_per_window(_model("full-coverage", layers), _memorize).values()) for layers in (2, 3))
    print(f"{three - two:.0f} aten operators per layer-window, {3 * two - 2 * three:.0f} per window besides")
    assert three - two <= OPS_PER_LAYER_WINDOW_BUDGET


def _read_with_autograd(model, windows: int) -> None:
    ids = random_ids(WINDOW * windows, seed=windows)
    with torch.enable_grad():
        model(ids, labels=ids).loss.backward()


def test_the_fused_attention_path_is_one_call_and_one_mask_per_layer_window():
    # the path a GPU takes (and the CPU under autograd): one SDPA call per layer over [memory | window]
    # with a boolean mask, the mask built once per window and shared by the layers
    model = _model("full-coverage", layers=3)
    ops = _ops_per_window(model, _read_with_autograd)
    forward_calls = {name: n for name, n in ops.items() if "scaled_dot_product" in name and "backward" not in name}
    assert sum(forward_calls.values()) == 3
    assert ops["aten.tril"] <= 1  # at most one causal mask per window (one per layer before)


def test_the_schedule_tables_are_built_once_and_shared():
    device = torch.device("cpu")
    whole, again = WindowPiece(0, 16, 4, 0, 0, True), WindowPiece(16, 32, 4, 0, 20, True)  # two windows, other entries
    assert raw_memory_rows(whole, device) is raw_memory_rows(again, device)
    assert piece_mask("segmentation", whole, device) is piece_mask("segmentation", again, device)
    assert piece_mask("full-coverage", whole, device) is None
    rows, shift = compaction_rows(16, 4, device)
    assert rows.tolist() == [4, 9, 14, 19] and shift.tolist() == [-4, -8, -12, -16]
    assert compaction_rows(16, 4, device)[0] is rows
    with torch.inference_mode():
        made_in_inference = raw_memory_rows(WindowPiece(0, 8, 4, 0, 0, False), device)
    assert not made_in_inference.raw.is_inference()  # usable later by a step autograd records
