"""Held-out evaluation: each condition scores the same tokens and matches a direct computation."""

from __future__ import annotations

import json

import pytest
import torch

from memorag.memory import MemoryConfig, MemoryModel
from memorag.training.evaluate import (
    FULL_CONTEXT,
    NO_MEMORY,
    evaluate_heldout,
    memory_condition,
    scored_spans,
)
from tests.memory.conftest import perturb_memory_parameters, random_ids, tiny_base


def model(window=16, **base):
    built = MemoryModel(tiny_base("llama", **base), MemoryConfig(window=window, ratios=[4]))
    perturb_memory_parameters(built)
    return built.eval()


def span_labels(ids, spans):
    """Labels that score exactly the evaluated predictions (targets start + 1 .. end - 1 of each span)."""
    labels = torch.full_like(ids, -100)
    for start, end in spans:
        labels[:, start + 1 : end] = ids[:, start + 1 : end]
    return labels


def test_scored_spans():
    assert scored_spans(64, 16, 1) == [(48, 64)]
    assert scored_spans(70, 16, 2) == [(48, 64), (64, 70)]


@pytest.mark.parametrize("ratio", [2, 4, 8])
def test_memory_condition_equals_the_model_loss_at_that_ratio(ratio):
    memory_model = model()
    ids = random_ids(64)
    spans = scored_spans(64, 16, 2)
    report = evaluate_heldout(memory_model, [ids[0].tolist()], ratios=[ratio], score_windows=2, baselines=False)
    fixed = MemoryModel(tiny_base("llama"), MemoryConfig(window=16, ratios=[ratio]))
    with torch.no_grad():
        for name, param in memory_model.memory_parameters().items():
            fixed.memory_parameters()[name].copy_(param)
        output = fixed(ids, labels=span_labels(ids, spans))
    score = report.scores[memory_condition(ratio)]
    assert score.tokens == output.num_loss_tokens == 2 * 15
    assert score.mean_nll == pytest.approx(float(output.loss), rel=1e-5)


def test_baselines_are_the_plain_base_model():
    memory_model = model()
    ids = random_ids(64, seed=3)
    report = evaluate_heldout(memory_model, [ids[0].tolist()], ratios=[4], score_windows=1)
    plain = tiny_base("llama")
    with torch.no_grad():
        alone = plain(ids[:, 48:]).logits[0, :-1]
        full = plain(ids).logits[0, 48:-1]
    target = ids[0, 49:]
    expected_alone = torch.nn.functional.cross_entropy(alone, target)
    expected_full = torch.nn.functional.cross_entropy(full, target)
    assert report.scores[NO_MEMORY].mean_nll == pytest.approx(float(expected_alone), rel=1e-5)
    assert report.scores[FULL_CONTEXT].mean_nll == pytest.approx(float(expected_full), rel=1e-5)
    assert {s.tokens for s in report.scores.values()} == {15}


def test_conditions_beyond_the_positions_are_reported_not_scored(tmp_path):
    memory_model = model(max_position_embeddings=39)
    sequences = [random_ids(64, seed=s)[0].tolist() for s in range(2)]
    report = evaluate_heldout(memory_model, sequences, ratios=[2, 8], score_windows=1)
    assert report.scores[FULL_CONTEXT].tokens == 0 and "positions" in report.scores[FULL_CONTEXT].note
    assert report.scores[memory_condition(2)].tokens == 0  # 3 windows of 8 entries + 16 > 39 positions
    assert report.scores[memory_condition(8)].tokens == 30
    table = report.table()
    assert "| memory r=8 | 30 |" in table and "n/a" in table
    report.save(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["conditions"]["memory r=2"]["perplexity"] is None
    assert data["conditions"]["memory r=8"]["tokens"] == 30


def test_weights_leave_padding_sequences_out():
    memory_model = model()
    sequences = [random_ids(48, seed=s)[0].tolist() for s in range(2)]
    both = evaluate_heldout(memory_model, sequences, ratios=[4], baselines=False)
    first = evaluate_heldout(memory_model, sequences[:1], ratios=[4], baselines=False)
    weighted = evaluate_heldout(memory_model, sequences, ratios=[4], baselines=False, weights=[1, 0])
    assert weighted.scores["memory r=4"].nll_sum == pytest.approx(first.scores["memory r=4"].nll_sum)
    assert both.scores["memory r=4"].tokens == 2 * weighted.scores["memory r=4"].tokens


def test_fp32_memory_beside_a_bf16_base_is_scored_in_bf16():
    memory_model = model()
    memory_model.base_model.to(torch.bfloat16)
    for param in memory_model.memory_parameters().values():
        param.data = param.data.to(torch.bfloat16).float()
    ids = random_ids(48)[0].tolist()
    report = evaluate_heldout(memory_model, [ids], ratios=[4],
                              autocast=lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    assert report.scores["memory r=4"].tokens == 15
    assert all(p.dtype == torch.float32 for p in memory_model.memory_parameters().values())  # restored


def test_the_other_text_control_reads_another_sequence_before_the_same_windows():
    memory_model = model()
    sequences = [random_ids(64, seed=s)[0].tolist() for s in range(2)]
    report = evaluate_heldout(memory_model, sequences, ratios=[4], baselines=False, other_text=True)
    spliced = [sequences[1][:48] + sequences[0][48:], sequences[0][:48] + sequences[1][48:]]
    direct = evaluate_heldout(memory_model, spliced, ratios=[4], baselines=False)
    control = report.scores["memory r=4, other text"]
    assert control.tokens == 30
    assert control.nll_sum == pytest.approx(direct.scores["memory r=4"].nll_sum, rel=1e-6)
    assert control.nll_sum != pytest.approx(report.scores["memory r=4"].nll_sum, rel=1e-6)
    single = evaluate_heldout(memory_model, sequences[:1], ratios=[4], baselines=False, other_text=True)
    assert single.scores["memory r=4, other text"].note == "needs two held-out sequences"
