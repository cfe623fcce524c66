"""How trained memory weights rank recorded RLGF preference pairs, against the weights the pairs were built from.

A diagnostic of a finished run. For each pair, its margin `log p(chosen set) - log p(rejected set)` is read
under the starting weights (the config's `model.memory_weights`, the pairs' reference model) and under the
trained weights, both in the config's precision and the same way the trainer reads a pair
(`rlgf_objective.pair_logprobs`). DPO's implicit reward ranks the chosen set higher where the trained margin
exceeds the starting one: on the pairs a run trained on, a share well above 50% says it fitted them, a share
near 50% that it fitted nothing. Both readings share the precision, so the offset of a float32 reference read
in bf16 cancels; the recorded reference's ranking is reported beside it.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from memorag.evaluation.bootstrap import mean_interval

from .build import build_model
from .errors import TrainingInputError
from .rlgf_objective import TokenizedPair, pair_logprobs
from .rlgf_pairs import pad_id, question_contexts
from .rlgf_trainer import checked_pair, render_pair
from .trainer import use_bf16


def read_pairs(path: str | Path, num_pairs: int | None, seed: int) -> list[dict[str, Any]]:
    """`num_pairs` records of a pairs file drawn without replacement by `seed`, in file order (all: None)."""
    file = Path(path)
    if not file.is_file():
        raise TrainingInputError(f"no pairs file {file}: `python train/build_rlgf_pairs.py --config CONFIG` writes it "
                                 "(from the tracked question shards, without a model, once the build has finished)")
    records = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if num_pairs is None or num_pairs >= len(records):
        return records
    keep = sorted(random.Random(seed).sample(range(len(records)), num_pairs))
    return [records[index] for index in keep]


def pair_margins(model, pairs: list[TokenizedPair], ratio: int, pad: int, bf16: bool, label: str,
                 progress: bool = True) -> list[tuple[float, float]]:
    """Each pair's (chosen, rejected) log-probabilities under `model`, without gradients."""
    out = []
    with torch.no_grad(), torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
        for pair in tqdm(pairs, desc=label, unit="pair", disable=not progress):
            chosen, rejected = pair_logprobs(model, pair, ratio, pad)
            out.append((float(chosen), float(rejected)))
    return out


def rank_pairs(cfg, weights: str, num_pairs: int | None = 100, seed: int = 0, progress: bool = True) -> dict[str, Any]:
    """The starting and the trained weights' readings of `num_pairs` pairs of `cfg.data.files[0]`: per pair and
    summarized (the share ranked by the implicit reward, with a 95% bootstrap interval over the pairs)."""
    if cfg.stage != "rlgf":
        raise TrainingInputError(f"this config is for stage {cfg.stage!r}; rank the pairs of a stage rlgf config")
    bf16, ratio, beta = use_bf16(cfg.precision), cfg.memory.ratios[0], cfg.rlgf.beta
    drawn = read_pairs(cfg.data.files[0], num_pairs, seed)  # a missing file is named before the models load
    start = build_model(cfg.model, cfg.memory, bf16=bf16)
    trained = build_model(dataclasses.replace(cfg.model, memory_weights=weights), cfg.memory, bf16=bf16)
    reference_sha256 = start.memory_weights_hash()
    records = [checked_pair(record, f"{cfg.data.files[0]} pair {record.get('id')}", reference_sha256, ratio,
                            cfg.model.memory_weights) for record in drawn]
    contexts = question_contexts(cfg, start.tokenizer)
    pairs = [render_pair(start.tokenizer, start.layout, record, contexts[record["id"]]) for record in records]
    pad = pad_id(start.tokenizer)
    before = pair_margins(start, pairs, ratio, pad, bf16, "starting weights", progress)
    after = pair_margins(trained, pairs, ratio, pad, bf16, "trained weights", progress)
    rows = []
    for record, pair, (start_w, start_l), (trained_w, trained_l) in zip(records, pairs, before, after, strict=True):
        rows.append({"id": record["id"], "reference": [pair.reference_chosen, pair.reference_rejected],
                     "starting": [start_w, start_l], "trained": [trained_w, trained_l],
                     "reward_margin": beta * ((trained_w - start_w) - (trained_l - start_l))})

    def share(test) -> dict[str, float] | None:
        return mean_interval([100.0 * bool(test(row)) for row in rows])

    def margin(row, side):
        return row[side][0] - row[side][1]

    return {
        "weights": weights, "starting_weights": cfg.model.memory_weights, "pairs_file": str(cfg.data.files[0]),
        "precision": "bf16" if bf16 else "fp32", "ratio": ratio, "beta": beta, "pairs": len(rows), "seed": seed,
        "trained over starting: chosen ranked higher (%)": share(lambda row: row["reward_margin"] > 0),
        "trained over starting: reward margin": mean_interval([row["reward_margin"] for row in rows]),
        "starting over the recorded reference: chosen ranked higher (%)":
            share(lambda row: margin(row, "starting") > margin(row, "reference")),
        "trained over the recorded reference: chosen ranked higher (%)":
            share(lambda row: margin(row, "trained") > margin(row, "reference")),
        "rows": rows,
    }
