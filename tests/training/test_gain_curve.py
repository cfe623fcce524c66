"""The context-gain curve recomputes both shares from committed per-sequence NLLs and never fills a ratio in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memorag.training.gain_curve import curve_table, load_curve, plot_curve

SHIPPED = Path("memorag/weights/memory-smollm2-135m-instruct")


def test_the_shipped_curve_gives_both_shares_and_names_what_was_not_evaluated(tmp_path):
    points = {p.label: p for p in load_curve(SHIPPED / "eval/curve.json", SHIPPED / "training_runs")}
    cpu = points["CPU: step 84, then 41 SFT steps (shipped until 2026-11-26)"]
    assert cpu.tokens == 214_784 + 119_803  # stage 1 to step 84, then 41 SFT steps (their end records)
    report = json.loads((SHIPPED / "eval/sft-step-41.json").read_text())
    assert cpu.shares[8]["content"]["share"] == pytest.approx(report["context_gain"]["r=8"]["share"], rel=1e-4)
    none, own, full = (report["conditions"][c]["mean_nll"] for c in ("no memory", "memory r=8", "full context"))
    assert cpu.shares[8]["net"]["share"] == pytest.approx((none - own) / (none - full), abs=1e-4)
    assert abs(cpu.shares[8]["net"]["share"]) < 0.01  # the CPU-trained memory was worth about nothing net
    # the shipped weights: stage 1 over two time-boxed runs to step 432, then 30 SFT steps with the mixed objective
    shipped = points["GPU: step 432, then 30 SFT steps (mix loss)"]
    assert shipped.tokens == 8_771_584 + 371_864
    report = json.loads((SHIPPED / "eval/control-sft-mix-30.json").read_text())
    for ratio in (2, 4, 8):  # recomputed from the per-sequence NLLs, they equal what the control reported
        for kind in ("net", "content"):
            assert shipped.shares[ratio][kind]["share"] == pytest.approx(report[f"{kind}_share"][f"r={ratio}"]["share"],
                                                                          abs=1e-6)
    assert shipped.shares[8]["net"]["low"] > 0.3  # past the 30% aim, its whole interval
    table = curve_table(list(points.values()), [2, 4, 8])
    assert "not evaluated" in table  # r=2 and r=4 were never scored by the CPU runs' evaluations
    assert plot_curve(list(points.values()), [2, 4, 8], tmp_path / "curve.png").stat().st_size > 1000


def test_a_step_the_log_never_recorded_is_an_error(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run/train_log.jsonl").write_text(json.dumps({"event": "end", "step": 3, "tokens_seen": 10}) + "\n")
    (tmp_path / "e.json").write_text(json.dumps({"conditions": {}}))
    (tmp_path / "curve.json").write_text(json.dumps([{"label": "x", "eval": "e.json", "runs": [["run", 4]]}]))
    with pytest.raises(ValueError, match="step 4"):
        load_curve(tmp_path / "curve.json", tmp_path)
