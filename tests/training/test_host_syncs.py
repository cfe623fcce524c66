"""One training step reads no tensor value on the host: the losses, token counts and gradient norm stay
tensors until the logging interval reads them (memorag/training/trainer.py `_train_step`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memorag.training.trainer import Trainer
from tests.host_reads import PROJECT, count_reads
from tests.training.helpers import debug_config, reset_accelerate


@pytest.mark.parametrize("kind", ["lm", "mix"])
def test_a_training_step_reads_no_tensor_on_the_host(tmp_path, monkeypatch, kind):
    reset_accelerate()
    trainer = Trainer(debug_config(tmp_path / "run", f"loss.kind={kind}", "optim.grad_accumulation=2"))
    try:
        batches = trainer._next_micro_batches()
        assert len(batches) == 2 and batches[0][0].shape[0] == 2  # two micro-batches of two sequences
        before = trainer.unwrapped.memory_embedding.detach().clone()
        with monkeypatch.context() as patch:
            seen = count_reads(patch)
            result = trainer._train_step(batches)
        assert not torch.equal(before, trainer.unwrapped.memory_embedding.detach())  # the step did train
        ours = {key: n for key, n in seen.items() if key[1].startswith(PROJECT)}
        assert ours == {}
        # what the libraries read: AdamW its step count, a CPU tensor (no device to wait for); for the
        # teacher's forward (distillation), transformers checks its positions for packed sequences
        libraries = {(name, Path(path).parent.name + "/" + Path(path).name) for name, path in seen}
        expected = {("item", "optim/optimizer.py")}
        if kind == "mix":
            expected.add(("__bool__", "transformers/masking_utils.py"))
        assert libraries <= expected
        assert isinstance(result["grad_norm"], torch.Tensor) and all(isinstance(x, torch.Tensor) for x in result["losses"])
    finally:
        trainer.close()


def test_the_interval_reads_what_the_step_kept(tmp_path):
    # the logged loss is the token-weighted mean of the micro-batches' losses, as computed in the step
    reset_accelerate()
    trainer = Trainer(debug_config(tmp_path / "run", "optim.grad_accumulation=2"))
    try:
        from memorag.training.trainer import _Interval

        batches = trainer._next_micro_batches()
        result = trainer._train_step(batches)
        interval = _Interval()
        interval.add(result, 1.0)
        record = interval.record(1, 1, trainer.accelerator)
        counts = [int((labels[:, 1:] != -100).sum()) for _, labels in batches]
        losses = [float(loss) for loss in result["losses"]]
        assert record["loss_tokens"] == sum(counts) > 0
        assert record["loss"] == pytest.approx(sum(loss * n for loss, n in zip(losses, counts, strict=True)) / sum(counts), rel=1e-12)
        assert record["grad_norm"] == pytest.approx(float(result["grad_norm"]), rel=1e-12) and record["grad_norm"] > 0
    finally:
        trainer.close()
