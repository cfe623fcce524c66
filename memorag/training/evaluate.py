"""Held-out evidence that the memory learns: perplexity of later windows given the memory.

Each held-out sequence is split into windows of `memory.window` tokens. The scored
tokens are the predictions inside the last `score_windows` windows: in a window
spanning tokens [s, e), the tokens s+1 .. e-1 predicted from s .. e-2. Every
condition scores exactly the same tokens:

- `memory r=R`: the memory model reads the earlier windows at ratio R (their raw
  tokens are dropped, only R-times fewer memory entries are kept) and then the
  scored window; the lower, the more the memory carries.
- `no memory`: the frozen base model on the scored window alone (the floor the
  memory must beat).
- `full context`: the frozen base model over the whole sequence, when it fits in the
  model's positions (the ceiling: nothing compressed).
- `memory r=R, other text` (optional control): each scored window [s, e) read after a
  memory of the same length made from *another* held-out sequence (its first s tokens)
  instead of its own. The whole memory is replaced for every scored window: no window
  of the scored text's own memory remains (a later scored window does not see the
  memory of an earlier scored one). A memory that carries content helps less here; a
  gain that survives it is a generic prefix effect.

With own memory a, other text's memory b, no memory c and full context d scored, the
report gives per ratio two shares of the window-to-full-context gap (c - d) in mean NLL,
each with a seeded bootstrap confidence interval over sequences:

- the *net share* (c - a) / (c - d): what reading the memory gains over the window
  alone (zero: the memory is worth nothing; negative: it costs);
- the *content share* (b - a) / (c - d), the *context gain*: what the memory's content
  (not its mere presence) closes. A memory can have a content share above zero and a
  net share of zero: a wrong memory hurts and its own merely does not.

`gap_shares` computes both from the per-sequence NLLs, so a saved report's shares can be
recomputed from its JSON (`per_sequence`).

`evaluate_heldout` returns an `EvalReport` (a table and JSON); the trainer runs it
every `eval.every_steps` steps, and `train/evaluate.py` runs it on a checkpoint.
docs/training.md explains why the other-text control is the clean one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from memorag.memory import Memory, MemoryModel
from memorag.memory.schedule import positions_needed
from memorag.storage.io import atomic_write_text

from .errors import TrainingInputError

logger = logging.getLogger(__name__)
NO_MEMORY = "no memory"
FULL_CONTEXT = "full context"
BOOTSTRAP_SAMPLES = 2000


def memory_condition(ratio: int) -> str:
    return f"memory r={ratio}"


def other_text_condition(ratio: int) -> str:
    return f"memory r={ratio}, other text"


@dataclass
class ConditionScore:
    nll_sum: float = 0.0
    tokens: int = 0
    note: str = ""  # why a condition was not scored (e.g. the context does not fit)

    @property
    def mean_nll(self) -> float:
        return self.nll_sum / self.tokens if self.tokens else math.nan

    @property
    def perplexity(self) -> float:
        return math.exp(self.mean_nll) if self.tokens else math.nan


@dataclass
class EvalReport:
    scores: dict[str, ConditionScore] = field(default_factory=dict)
    num_sequences: int = 0
    seq_length: int = 0
    window: int = 0
    score_windows: int = 1
    step: int | None = None
    # per condition, each counted sequence's (NLL sum, tokens): what the bootstrap resamples
    per_sequence: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    bootstrap_seed: int = 0

    def shares(self) -> dict[int, dict[str, dict[str, float]]]:
        """Per ratio, `{"net": ..., "content": ...}` for the shares its scored conditions allow (`gap_shares`)."""
        return gap_shares(self.per_sequence, seed=self.bootstrap_seed)

    def context_gains(self) -> dict[int, dict[str, float]]:
        """Per ratio with all four conditions scored: the content share (b - a) / (c - d) and its interval."""
        return {ratio: pair["content"] for ratio, pair in self.shares().items() if "content" in pair}

    def to_dict(self) -> dict:
        shares = self.shares()
        by_kind = {kind: {f"r={ratio}": pair[kind] for ratio, pair in shares.items() if kind in pair}
                   for kind in ("net", "content")}
        return {
            "step": self.step,
            "num_sequences": self.num_sequences,
            "seq_length": self.seq_length,
            "window": self.window,
            "score_windows": self.score_windows,
            "conditions": {
                name: {"perplexity": _round(score.perplexity), "mean_nll": _round(score.mean_nll),
                       "tokens": score.tokens, **({"note": score.note} if score.note else {})}
                for name, score in self.scores.items()
            },
            **({"net_share": by_kind["net"]} if by_kind["net"] else {}),
            **({"content_share": by_kind["content"]} if by_kind["content"] else {}),
            **({"per_sequence": {name: [[round(nll, 6), count] for nll, count in rows]
                                 for name, rows in self.per_sequence.items()}} if self.per_sequence else {}),
        }

    def table(self) -> str:
        header = (f"held-out perplexity of the last {self.score_windows} window(s) of {self.window} tokens, "
                  f"{self.num_sequences} sequence(s) of {self.seq_length} tokens"
                  + (f", step {self.step}" if self.step is not None else ""))
        lines = [header, "", "| condition | scored tokens | mean NLL | perplexity |", "|---|---:|---:|---:|"]
        for name, score in self.scores.items():
            if score.tokens:
                lines.append(f"| {name} | {score.tokens} | {score.mean_nll:.4f} | {score.perplexity:.3f} |")
            else:
                lines.append(f"| {name} | 0 | n/a | n/a ({score.note}) |")
        shares = self.shares()
        lines += ["", share_table(shares, self.num_sequences)] if shares else []
        return "\n".join(lines)

    def save(self, path: str | Path, **settings: object) -> Path:
        """The report as JSON; `settings` (what was scored and how: weights, precision, device) go first."""
        return atomic_write_text(path, json.dumps(settings | self.to_dict(), indent=2) + "\n")


def gap_share(high: torch.Tensor, low: torch.Tensor, alone: torch.Tensor, full: torch.Tensor,
              seed: int = 0, samples: int = BOOTSTRAP_SAMPLES) -> dict[str, float]:
    """(mean(high) - mean(low)) / (mean(alone) - mean(full)) of mean NLLs from per-sequence [S, 2]
    (NLL sum, tokens) rows, with a 95% percentile bootstrap interval over sequences (resampled
    with a generator seeded by `seed`; the same draws for every share of one report)."""

    def share(index: torch.Tensor) -> torch.Tensor:  # index [K, S] -> [K]
        mean = lambda rows: rows[index, 0].sum(-1) / rows[index, 1].sum(-1)
        return (mean(high) - mean(low)) / (mean(alone) - mean(full))

    count = low.shape[0]
    point = float(share(torch.arange(count)[None])[0])
    generator = torch.Generator().manual_seed(seed)
    draws = share(torch.randint(0, count, (samples, count), generator=generator))
    draws = draws[torch.isfinite(draws)]
    low_q, high_q = (torch.quantile(draws, torch.tensor([0.025, 0.975], dtype=draws.dtype)).tolist()
                     if draws.numel() else (math.nan, math.nan))
    return {"share": point, "low": low_q, "high": high_q, "sequences": count, "bootstrap_samples": samples,
            "seed": seed}


def context_gain(own: torch.Tensor, other: torch.Tensor, alone: torch.Tensor, full: torch.Tensor,
                 seed: int = 0, samples: int = BOOTSTRAP_SAMPLES) -> dict[str, float]:
    """The content share (b - a) / (c - d): other text's memory b against own memory a."""
    return gap_share(other, own, alone, full, seed, samples)


def net_gain(own: torch.Tensor, alone: torch.Tensor, full: torch.Tensor,
             seed: int = 0, samples: int = BOOTSTRAP_SAMPLES) -> dict[str, float]:
    """The net share (c - a) / (c - d): no memory c against own memory a."""
    return gap_share(alone, own, alone, full, seed, samples)


def gap_shares(per_sequence: dict[str, Sequence[Sequence[float]]], seed: int = 0
               ) -> dict[int, dict[str, dict[str, float]]]:
    """Per ratio, the net share (own memory, no memory and full context scored for the same
    sequences) and the content share (the other text's memory too), from per-sequence
    (NLL sum, tokens) rows keyed by condition name, as `EvalReport.per_sequence` or its JSON hold them."""
    rows = {name: torch.tensor([list(row) for row in value], dtype=torch.float64)
            for name, value in per_sequence.items() if len(value)}
    result: dict[int, dict[str, dict[str, float]]] = {}
    if NO_MEMORY not in rows or FULL_CONTEXT not in rows:
        return result
    alone, full = rows[NO_MEMORY], rows[FULL_CONTEXT]
    ratios = sorted(int(name.removeprefix("memory r=")) for name in rows
                    if name.startswith("memory r=") and not name.endswith("other text"))
    for ratio in ratios:
        own, other = rows[memory_condition(ratio)], rows.get(other_text_condition(ratio))
        if not (len(own) == len(alone) == len(full)):
            continue
        pair = {"net": net_gain(own, alone, full, seed=seed)}
        if other is not None and len(other) == len(own):
            pair["content"] = context_gain(own, other, alone, full, seed=seed)
        result[ratio] = pair
    return result


def share_table(shares: dict[int, dict[str, dict[str, float]]], sequences: int) -> str:
    """A markdown table of both shares per ratio (the printed report's and the README's layout)."""
    shown = lambda pair, kind: (f"{pair[kind]['share']:.1%} | {pair[kind]['low']:.1%} .. {pair[kind]['high']:.1%}"
                                if kind in pair else "not scored | ")
    lines = ["net share = (no memory - own memory) / (no memory - full context); content share (context gain) = "
             f"(other text - own memory) / (no memory - full context); mean NLL, 95% bootstrap interval over "
             f"{sequences} sequences", "",
             "| ratio | net share | 95% interval | content share | 95% interval |", "|---|---:|---|---:|---|"]
    lines += [f"| {ratio} | {shown(pair, 'net')} | {shown(pair, 'content')} |" for ratio, pair in shares.items()]
    return "\n".join(lines)


def heldout_sequences(cfg, tokenizer) -> list[list[int]]:
    """The first `eval.num_sequences` sequences of `eval.seq_length` tokens of `eval.files` (a `TrainConfig`)."""
    from memorag.training.data import PackedBatches

    ev, data = cfg.eval, cfg.data
    if not ev.files:
        raise TrainingInputError("eval.files is empty: name the held-out text files")
    spec = replace(
        data.packing_spec(sequences_per_batch=1, seed=cfg.seed, max_epochs=1),
        min_length=ev.seq_length, max_length=ev.seq_length, length_multiple=1, shuffle_files=False,
    )
    tokenize = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]
    stream = PackedBatches(ev.files, tokenize, spec, tokenizer.bos_token_id, tokenizer.eos_token_id)
    sequences = [batch[0] for _, batch in zip(range(ev.num_sequences), stream)]
    if not sequences:
        raise TrainingInputError(f"eval.files hold fewer than eval.seq_length={ev.seq_length} tokens: no held-out "
                                 "sequence; add held-out text or lower eval.seq_length")
    if len(sequences) < ev.num_sequences:
        logger.warning("eval.files give %d held-out sequences, not %d", len(sequences), ev.num_sequences)
    return sequences


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def scored_spans(length: int, window: int, score_windows: int) -> list[tuple[int, int]]:
    """[start, end) of the last `score_windows` windows of a sequence of `length` tokens."""
    spans = [(start, min(start + window, length)) for start in range(0, length, window)]
    return spans[-score_windows:]


def _nll(logits: torch.Tensor, targets: torch.Tensor) -> tuple[float, int]:
    """Summed next-token NLL of `logits` [n, V] against `targets` [n]."""
    loss = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum")
    return float(loss), int(targets.numel())


def _memory_nll(model: MemoryModel, ids: torch.Tensor, ratio: int, spans: list[tuple[int, int]]) -> tuple[float, int]:
    """Read `ids` [1, N] window by window at `ratio`, scoring the spans."""
    window, length = model.config.window, ids.shape[1]
    cache = model.new_cache(reserve=positions_needed(length, window, ratio))
    ratio_of = lambda _index: ratio
    scored = dict(spans)
    nll, count = 0.0, 0
    for start in range(0, length, window):
        end = min(start + window, length)
        hidden = model.read_tokens(ids[:, start:end], cache, ratio_of, keep_hidden=start in scored)
        if start in scored:
            logits = model.lm_head(model.final_norm(torch.cat(hidden, 1)))[0, :-1]  # [n - 1, V]
            piece = _nll(logits, ids[0, start + 1 : end])
            nll, count = nll + piece[0], count + piece[1]
    return nll, count


def _swapped_memory_nll(model: MemoryModel, ids: torch.Tensor, other: torch.Tensor, ratio: int,
                        spans: list[tuple[int, int]]) -> tuple[float, int]:
    """Each span of `ids` [1, N] read after the memory of `other`'s tokens before it (the same
    length of another text) in place of its own: the whole memory is the other text's."""
    window, length = model.config.window, ids.shape[1]
    cache = model.new_cache(reserve=positions_needed(length, window, ratio))
    ratio_of = lambda _index: ratio
    nll, count = 0.0, 0
    for start, end in spans:
        done = cache.state.num_tokens
        if start > done:
            model.read_tokens(other[:, done:start], cache, ratio_of)
        keys, values = cache.export()  # a copy: the other text's memory goes on unchanged
        borrowed = Memory(keys, values, cache.state, identity=model.identity(), ratio=ratio)
        scoring = model.new_cache(borrowed, reserve=window + window // ratio)
        hidden = model.read_tokens(ids[:, start:end], scoring, ratio_of, keep_hidden=True)
        logits = model.lm_head(model.final_norm(torch.cat(hidden, 1)))[0, :-1]  # [n - 1, V]
        piece = _nll(logits, ids[0, start + 1 : end])
        nll, count = nll + piece[0], count + piece[1]
    return nll, count


def _base_nll(model: MemoryModel, ids: torch.Tensor, spans: list[tuple[int, int]], full: bool) -> tuple[float, int]:
    """The frozen base model: each span alone (`full=False`) or the whole sequence once (`full=True`)."""
    base = model.base_model  # the patched attention runs the base attention when no memory step is given
    nll, count = 0.0, 0
    if full:
        keep = torch.cat([torch.arange(start, end - 1) for start, end in spans]).to(ids.device)
        logits = base(input_ids=ids, logits_to_keep=keep, use_cache=False).logits[0]  # [n, V]
        return _nll(logits, ids[0, keep + 1])
    for start, end in spans:
        logits = base(input_ids=ids[:, start:end], use_cache=False).logits[0, :-1]
        piece = _nll(logits, ids[0, start + 1 : end])
        nll, count = nll + piece[0], count + piece[1]
    return nll, count


def _score_sequence(model, ids, ratios, spans, baselines: bool, report: EvalReport) -> dict[str, tuple[float, int]]:
    results: dict[str, tuple[float, int]] = {}
    if baselines:
        results[NO_MEMORY] = _base_nll(model, ids, spans, full=False)
        if not report.scores[FULL_CONTEXT].note:
            results[FULL_CONTEXT] = _base_nll(model, ids, spans, full=True)
    for ratio in ratios:
        name = memory_condition(ratio)
        if not report.scores[name].note:
            results[name] = _memory_nll(model, ids, ratio, spans)
    return results


@contextlib.contextmanager
def memory_in_base_dtype(model: MemoryModel):
    """Run with the memory parameters in the base weights' dtype, as inference loads them.

    Training keeps fp32 memory parameters beside a bf16 base (mixed precision); scoring
    casts them to bf16 for its duration, so every row of the cache has one dtype.
    """
    base_dtype = model.embed_tokens.weight.dtype
    params = list(model.memory_parameters().values())
    kept = [p.data for p in params]
    if all(data.dtype == base_dtype for data in kept):
        yield
        return
    try:
        for param in params:
            param.data = param.data.to(base_dtype)
        yield
    finally:
        for param, data in zip(params, kept):
            param.data = data


def _empty_report(model: MemoryModel, num_sequences: int, length: int, ratios: Sequence[int], score_windows: int,
                  baselines: bool, other_text: bool) -> EvalReport:
    """A report with a score for every condition, each noted when it cannot be run (a ratio that
    does not divide the window, beyond the model's positions, one sequence for the controls)."""
    window = model.config.window
    controls = [other_text_condition(r) for r in ratios] if other_text else []
    names = ([NO_MEMORY] if baselines else []) + [memory_condition(r) for r in ratios] + controls
    names += [FULL_CONTEXT] if baselines else []
    report = EvalReport({name: ConditionScore() for name in names}, num_sequences, length, window, score_windows)
    for name in controls:
        if num_sequences < 2:
            report.scores[name].note = "needs two held-out sequences"
    for ratio in ratios:
        if window % ratio:
            report.scores[memory_condition(ratio)].note = f"ratio {ratio} does not divide the window {window}"
        elif positions_needed(length, window, ratio) > model.max_positions:
            report.scores[memory_condition(ratio)].note = "beyond the model's positions at this ratio"
        if other_text and report.scores[memory_condition(ratio)].note:
            report.scores[other_text_condition(ratio)].note = report.scores[memory_condition(ratio)].note
    if baselines and length > model.max_positions:
        report.scores[FULL_CONTEXT].note = f"longer than the model's {model.max_positions} positions"
    return report


@torch.no_grad()
def evaluate_heldout(
    model: MemoryModel,
    sequences: Sequence[Sequence[int]],
    ratios: Sequence[int] = (2, 4, 8, 16, 32),
    score_windows: int = 1,
    baselines: bool = True,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    weights: Sequence[int] | None = None,
    other_text: bool = False,
    show_progress: bool = False,
) -> EvalReport:
    """Score the held-out `sequences` under every condition (see the module docstring).

    `weights[i]` = 0 runs sequence i without counting it (keeps distributed ranks in step).
    `other_text` adds the control conditions (needs two sequences or more): sequence i
    borrows the memory of sequence (i + S // 2) mod S, the farthest in the list. `show_progress`:
    a progress bar over the sequences (on stderr), for a standalone evaluation.
    """
    if not sequences:
        raise ValueError("no held-out sequences to evaluate")
    window = model.config.window
    length = len(sequences[0])
    if any(len(sequence) != length for sequence in sequences):
        raise ValueError("held-out sequences must have one length")
    if length <= window:
        raise ValueError(f"held-out sequences of {length} tokens have no window before the scored one "
                         f"(window {window}); use longer sequences")
    spans = scored_spans(length, window, score_windows)
    report = _empty_report(model, len(sequences), length, ratios, score_windows, baselines, other_text)
    controls = [other_text_condition(r) for r in ratios] if other_text else []
    was_training = model.training
    model.eval()
    try:
        with memory_in_base_dtype(model):
            for index, sequence in enumerate(tqdm(sequences, desc="held-out sequences", unit="seq",
                                                  disable=not show_progress)):
                ids = torch.tensor([list(sequence)], dtype=torch.long, device=model.device)
                with autocast():
                    results = _score_sequence(model, ids, ratios, spans, baselines, report)
                    for ratio in ratios if controls else ():
                        name = other_text_condition(ratio)
                        if not report.scores[name].note:
                            partner = (index + max(len(sequences) // 2, 1)) % len(sequences)
                            other = torch.tensor([list(sequences[partner])], dtype=torch.long, device=model.device)
                            results[name] = _swapped_memory_nll(model, ids, other, ratio, spans)
                if weights is None or weights[index] > 0:
                    for name, (nll, count) in results.items():
                        report.scores[name].nll_sum += nll
                        report.scores[name].tokens += count
                        report.per_sequence.setdefault(name, []).append((nll, count))
    finally:
        model.train(was_training)
    return report
