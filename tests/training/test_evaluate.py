"""Held-out evaluation: each condition scores the same tokens and matches a direct computation."""

from __future__ import annotations

import json

import pytest
import torch

from memorag.memory import MemoryConfig, MemoryModel
from memorag.training.evaluate import (
    FULL_CONTEXT,
    NO_MEMORY,
    context_gain,
    evaluate_heldout,
    gap_shares,
    memory_condition,
    net_gain,
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


def _nll_after(memory_model, memory, window_ids):
    """Summed NLL of a window's own next-token predictions read after `memory`, by hand."""
    with torch.no_grad():
        logits = memory_model(window_ids, memory=memory, return_logits=True).logits[0, :-1]
    return float(torch.nn.functional.cross_entropy(logits, window_ids[0, 1:], reduction="sum"))


def test_the_other_text_control_replaces_the_whole_memory_of_every_scored_window():
    memory_model = model()
    sequences = [random_ids(64, seed=s)[0].tolist() for s in range(2)]
    report = evaluate_heldout(memory_model, sequences, ratios=[4], score_windows=2, baselines=False,
                              other_text=True)
    control = report.scores["memory r=4, other text"]
    assert control.tokens == 2 * 2 * 15
    expected = 0.0
    for own, other in ((0, 1), (1, 0)):
        own_ids = torch.tensor([sequences[own]])
        for start in (32, 48):  # each scored window after the other text's first `start` tokens, nothing of its own
            memory = memory_model.memorize(sequences[other][:start], show_progress=False)
            assert memory.num_entries == start // 4
            expected += _nll_after(memory_model, memory, own_ids[:, start : start + 16])
    assert control.nll_sum == pytest.approx(expected, rel=1e-5)
    # the old splice (other text only before the first scored window) is not what is computed
    spliced = [sequences[1][:32] + sequences[0][32:], sequences[0][:32] + sequences[1][32:]]
    splice = evaluate_heldout(memory_model, spliced, ratios=[4], score_windows=2, baselines=False)
    assert control.nll_sum != pytest.approx(splice.scores["memory r=4"].nll_sum, rel=1e-4)
    assert control.nll_sum != pytest.approx(report.scores["memory r=4"].nll_sum, rel=1e-4)
    assert [count for _, count in report.per_sequence["memory r=4, other text"]] == [30, 30]
    single = evaluate_heldout(memory_model, sequences[:1], ratios=[4], baselines=False, other_text=True)
    assert single.scores["memory r=4, other text"].note == "needs two held-out sequences"


def test_the_partner_is_the_farthest_sequence():
    memory_model = model()
    sequences = [random_ids(48, seed=s)[0].tolist() for s in range(4)]
    report = evaluate_heldout(memory_model, sequences, ratios=[4], baselines=False, other_text=True)
    first_own = torch.tensor([sequences[0]])
    memory = memory_model.memorize(sequences[2][:32], show_progress=False)  # partner of 0 is 0 + 4 // 2
    expected = _nll_after(memory_model, memory, first_own[:, 32:])
    assert report.per_sequence["memory r=4, other text"][0][0] == pytest.approx(expected, rel=1e-5)


def test_context_gain_is_the_share_of_the_gap_with_a_seeded_interval():
    rows = lambda values: torch.tensor([[v * 10, 10] for v in values], dtype=torch.float64)
    own, other, alone, full = rows([2.0, 2.2, 1.8]), rows([2.5, 2.4, 2.3]), rows([3.0, 3.2, 2.8]), rows([1.0, 1.2, 0.8])
    gain = context_gain(own, other, alone, full, seed=7)
    assert gain["share"] == pytest.approx((2.4 - 2.0) / (3.0 - 1.0))
    assert gain["low"] <= gain["share"] <= gain["high"]
    assert gain == context_gain(own, other, alone, full, seed=7)  # seeded
    assert gain["low"] >= (2.3 - 2.2) / 2.0 - 1e-9 and gain["high"] <= (2.5 - 1.8) / 2.0 + 1e-9


def test_the_report_gives_the_context_gain_when_all_four_conditions_are_scored(tmp_path):
    memory_model = model()
    sequences = [random_ids(48, seed=s)[0].tolist() for s in range(3)]
    report = evaluate_heldout(memory_model, sequences, ratios=[4], other_text=True)
    gains = report.context_gains()
    mean = lambda name: report.scores[name].mean_nll
    expected = (mean("memory r=4, other text") - mean("memory r=4")) / (mean(NO_MEMORY) - mean(FULL_CONTEXT))
    assert gains[4]["share"] == pytest.approx(expected)
    net = (mean(NO_MEMORY) - mean("memory r=4")) / (mean(NO_MEMORY) - mean(FULL_CONTEXT))
    assert report.shares()[4]["net"]["share"] == pytest.approx(net)
    assert "net share" in report.table() and "content share" in report.table()
    report.save(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["content_share"]["r=4"]["share"] == pytest.approx(expected)
    assert data["net_share"]["r=4"]["share"] == pytest.approx(net)
    recomputed = gap_shares(data["per_sequence"])  # from the saved JSON alone (NLLs rounded to 6 decimals)
    assert recomputed[4]["net"]["share"] == pytest.approx(net, rel=1e-5)
    assert recomputed[4]["content"]["share"] == pytest.approx(expected, rel=1e-4)
    assert len(data["per_sequence"][NO_MEMORY]) == 3
    assert evaluate_heldout(memory_model, sequences, ratios=[4]).context_gains() == {}  # no control, no gain


def test_the_net_share_is_zero_when_the_memory_scores_like_the_window_alone():
    rows = lambda values: torch.tensor([[v * 10, 10] for v in values], dtype=torch.float64)
    own, other, alone, full = rows([3.0, 3.2, 2.8]), rows([3.5, 3.4, 3.3]), rows([3.0, 3.2, 2.8]), rows([1.0, 1.2, 0.8])
    assert net_gain(own, alone, full)["share"] == pytest.approx(0.0)
    assert context_gain(own, other, alone, full)["share"] == pytest.approx((3.4 - 3.0) / 2.0)
    per_sequence = {NO_MEMORY: alone.tolist(), FULL_CONTEXT: full.tolist(), "memory r=2": own.tolist(),
                    "memory r=8": own.tolist(), "memory r=8, other text": other.tolist()}
    shares = gap_shares(per_sequence)
    assert sorted(shares) == [2, 8]
    assert set(shares[2]) == {"net"}  # r=2 has no control scored: no content share, not a guess
    assert shares[8]["content"]["share"] == pytest.approx(0.2)
