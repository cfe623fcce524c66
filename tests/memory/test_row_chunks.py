"""Scoring labelled rows a chunk at a time: the same sums and gradients as all rows at once, and
never more than a chunk of rows of full-vocabulary logits (memorag/memory/windowed_scoring.py)."""

from __future__ import annotations

import pytest
import torch

from memorag.memory.windowed_scoring import chunked_row_sums
from memorag.training.config import LossSection
from memorag.training.objectives import objective_forward
from tests.memory.conftest import random_ids, tiny_memory_model


class LogitRows:
    """The most rows one call of the model's head produced (forward passes and recomputations alike)."""

    def __init__(self, model) -> None:
        self.most = 0
        self.handle = model.lm_head.register_forward_hook(self._seen)

    def _seen(self, _module, _inputs, output: torch.Tensor) -> None:
        self.most = max(self.most, output.shape[:-1].numel())

    def close(self) -> None:
        self.handle.remove()


def scored_rows(seed: int = 0):
    """Raw rows [2, 40, D] that need gradients, their targets [2, 40] (a third unlabelled), teacher states."""
    model = tiny_memory_model("llama", seed=seed)
    generator = torch.Generator().manual_seed(seed)
    width = model.base_model.config.hidden_size
    hidden = torch.randn(2, 40, width, generator=generator)
    targets = random_ids(40, batch=2, seed=seed + 1)
    targets[:, ::3] = -100
    teacher = torch.randn(2, 40, width, generator=generator)
    return model, hidden, targets, teacher


@pytest.mark.parametrize("with_teacher", [False, True])
def test_chunked_scores_and_gradients_equal_the_unchunked_ones(with_teacher):
    model, hidden, targets, teacher = scored_rows()
    results = []
    for chunk_rows in (1000, 7):
        rows = hidden.clone().requires_grad_(True)
        watch = LogitRows(model)
        ce, kl = model.score_labelled(rows, targets, teacher if with_teacher else None, chunk_rows=chunk_rows)
        (ce + 0.5 * kl).backward()
        watch.close()
        results.append((ce.detach(), kl.detach(), rows.grad, watch.most))
    (ce_all, kl_all, grad_all, most_all), (ce_chunked, kl_chunked, grad_chunked, most_chunked) = results
    labelled = int((targets != -100).sum())
    torch.testing.assert_close(ce_chunked, ce_all, rtol=1e-5, atol=1e-5)
    # the KL sums terms of both signs: fp32 reordering moves it by ~2e-5 relative (in fp64 the two agree to 1e-9)
    torch.testing.assert_close(kl_chunked, kl_all, rtol=1e-4, atol=1e-5)
    # a row's gradient sums over the vocabulary in another order per chunk: an element near zero can move by
    # one fp32 step of the row's larger ones (1.2e-7 seen on an AMD EPYC, within 1e-7 on an Intel Xeon)
    torch.testing.assert_close(grad_chunked, grad_all, rtol=1e-5, atol=5e-7)
    assert grad_all[targets == -100].abs().sum() == 0 and grad_all.abs().sum() > 0
    assert (float(kl_all) > 0) == with_teacher
    assert most_all == labelled and most_chunked == 7  # the largest logits: [labelled, V] against [7, V]


def test_one_chunk_is_the_plain_computation():
    calls = []

    def score(rows: torch.Tensor) -> tuple[torch.Tensor]:
        calls.append(rows.shape[0])
        return (rows.sum(),)

    values = torch.arange(10.0, requires_grad=True)
    (whole,) = chunked_row_sums(score, (values,), chunk_rows=10)
    (chunked,) = chunked_row_sums(score, (values,), chunk_rows=4)
    assert calls == [10, 4, 4, 2] and float(whole.detach()) == float(chunked.detach()) == 45.0
    with pytest.raises(ValueError, match="chunk_rows"):
        chunked_row_sums(score, (values,), chunk_rows=0)


@pytest.mark.parametrize("kind", ["lm", "mix"])
def test_the_objective_in_chunks_equals_the_objective_at_once(kind):
    # windows checkpointed (the training setting): chunks are recomputed inside a recomputed window
    ids = random_ids(48, batch=2, seed=3)
    labels = ids.clone()
    labels[:, :10] = -100
    results = []
    for chunk_rows in (1000, 5):
        model = tiny_memory_model("llama", seed=2).train()
        model.gradient_checkpointing = True
        watch = LogitRows(model)
        output = objective_forward(model, ids, labels, LossSection(kind=kind, weight=0.5), ratio_seed=1,
                                   chunk_rows=chunk_rows)
        output.loss.backward()
        watch.close()
        grads = {name: p.grad for name, p in model.memory_parameters().items() if p.grad is not None}
        results.append((output.loss.detach(), grads, watch.most))
    (loss_all, grads_all, most_all), (loss_chunked, grads_chunked, most_chunked) = results
    torch.testing.assert_close(loss_chunked, loss_all, rtol=1e-5, atol=1e-6)
    assert grads_all and grads_all.keys() == grads_chunked.keys()
    for name, grad in grads_all.items():
        torch.testing.assert_close(grads_chunked[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    assert most_chunked == 5 and most_all == 2 * 16  # a 16-token window of two sequences, all labelled
