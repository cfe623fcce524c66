"""Publish memory weights on the Hugging Face hub: a model card filled from the folder, one upload.

    python train/publish.py --weights runs/sft-smollm2/final --repo you/smollm2-memory
    python train/publish.py --weights runs/sft-smollm2/final --repo you/smollm2-memory --card-only card.md

What is uploaded: `memory_config.json`, `memory_weights.safetensors` (the memory
parameters only; the base model is not copied) and `README.md`, the card below, in one
commit. The card is filled from the folder itself: the manifest (base model, memory
settings, weights hash), the training config saved beside the weights (stage, steps,
data file names, optimizer) when there is one, and a held-out evaluation JSON (written
by `train/evaluate.py --out` or a training run's `eval/`) when given. Published
weights load with `MemoryModel.from_pretrained(base, memory_weights="you/name")`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors.torch import load_file, save_file

from memorag.memory.checkpoint import CONFIG, FORMAT, WEIGHTS, verify_memory_weights
from memorag.storage.io import atomic_directory, is_saved, sha256_file

from .run_checkpoints import TRAIN_CONFIG, TRAINER_STATE

CARD_TEMPLATE = """---
{front_matter}---

# {title}

Memory weights for memorag, an open re-implementation of MemoRAG: with them the frozen
base model `{base}` reads a long context once, compresses it into memory tokens, and
writes clues that drive retrieval. This repository holds only the parameters that
make the base a memory model ({memory_description}); the base model's own weights are
not included and are loaded from `{base}`.

## Use

```python
from memorag.memory import MemoryModel

model = MemoryModel.from_pretrained("{base}", memory_weights="{repo_id}")
memory = model.memorize(open("book.txt").read())
print(model.generate("Who is the narrator?", memory=memory, max_new_tokens=64))
```

From the command line: `memorag memorize book.txt --memory-model {base} --memory-weights {repo_id} --out book.mrag`.
The weights are downloaded once into the hub cache and checked against the hash in
`memory_config.json` before use.

## Memory settings

| window | ratios | ratio mix | attention | memory parameters | memory embedding starts from |
|---:|---|---|---|---|---|
| {window} | {ratios} | {ratio_mix} | {attention} | {memory_params} | the {embed_init} token |
{trained_with}
Base model shape the weights were made for: {base_shape}. Loading them into another
base model is refused.

## Training

{training}

## Evaluation

{evaluation}

## Files

| file | what |
|---|---|
| `memory_weights.safetensors` | the memory parameters (sha256 `{weights_sha256}`) |
| `memory_config.json` | the memory settings, the base model's shape and the weights' hash |

## Limitations

- These weights work only on top of `{base}`; answers are never better than that base
  model allows.
- Compression loses detail, more at larger ratios: exact facts far back in a long
  context may be missed or paraphrased, so check answers against retrieved evidence.
- How much the memory helps depends on how long and on what it was trained (see
  Training); weights trained briefly or on narrow text mostly learn a generic prefix.
"""


def _front_matter(base: str, license_id: str | None) -> str:
    lines = ["tags:", "- memorag", "- memory-model", "- long-context"]
    if "/" in base and not base.startswith(("/", ".", "random:", "embedded")):
        lines.append(f"base_model: {base}")
    if license_id:
        lines.append(f"license: {license_id}")
    return "\n".join(lines) + "\n"


def _trained_with(manifest: dict[str, Any]) -> str:
    trained = manifest.get("trained_memory_config")
    if not trained:
        return ""
    ratios = ", ".join(str(r) for r in trained.get("ratios", []))
    return (f"\nThe weights memorize at the ratio above; they were trained with ratios {ratios} "
            f"({trained.get('ratio_mix')} mix). Another ratio can be asked for with a `MemoryConfig`.\n")


def _training_section(folder: Path) -> str:
    config_path = folder / TRAIN_CONFIG
    if not config_path.is_file():
        return ("No training record was saved with these weights. Weights that were never trained are copies "
                "of the base model's projections and its end-of-sequence embedding, and hurt more than they help.")
    config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    optim, data = config.get("optim") or {}, config.get("data") or {}
    files = ", ".join(f"`{Path(str(name)).name}`" for name in data.get("files") or []) or "not recorded"
    planned = (f"`optim.max_steps`={optim['max_steps']}" if optim.get("max_steps")
               else f"{optim.get('epochs', 1)} epoch(s)")
    state = _trainer_state(folder)
    length = (f"{state['step']} steps, {state['tokens_seen']:,} tokens (of {planned} planned)"
              if state else planned)
    objective = {"lm": "next-token loss", "distill": "KL to the base model reading the whole text",
                 "mix": "next-token loss plus KL to the base model reading the whole text"}
    loss_kind = (config.get("loss") or {}).get("kind", "lm")
    stage = {"pretrain": f"stage 1 (pretraining on long raw text, {objective.get(loss_kind, loss_kind)} "
                         "over every window)",
             "sft": f"stage 2 (clue fine-tuning: {objective.get(loss_kind, loss_kind)}, on the written clues only)",
             "rlgf": "stage 3 (RLGF: DPO on pairs of the memory's own clue sets, preferred by the answers they led "
                     "to)",
             }.get(config.get("stage"), "unknown")
    start = (config.get("model") or {}).get("memory_weights")
    rows = [
        ("stage", stage),
        ("started from", f"`{start}`" if start else "copies of the base model's projections"),
        ("length", length),
        ("data files", files),
        ("sequence length", f"at most {data.get('max_length')} tokens" if config.get("stage") in ("sft", "rlgf")
                            else f"{data.get('min_length')}-{data.get('max_length')} tokens"),
        ("batch size per process", data.get("batch_size")),
        ("optimizer", f"AdamW, lr {optim.get('lr')}, {optim.get('schedule')} schedule, "
                      f"{optim.get('warmup_steps')} warmup steps"),
        ("precision", config.get("precision")),
        ("seed", config.get("seed")),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return ("Only the memory parameters were trained; the base model stayed frozen.\n\n"
            "| setting | value |\n|---|---|\n" + table)


def _trainer_state(folder: Path) -> dict[str, Any] | None:
    """The step and tokens a checkpoint folder records (None: not a checkpoint)."""
    path = folder / TRAINER_STATE
    if not path.is_file():
        return None
    state = json.loads(path.read_text(encoding="utf-8"))
    return state if isinstance(state.get("step"), int) and isinstance(state.get("tokens_seen"), int) else None


def _evaluation_section(report: dict[str, Any] | None) -> str:
    if not report:
        return "No evaluation was published with these weights."
    header = (f"Held-out perplexity of the last {report.get('score_windows')} window(s) of {report.get('window')} "
              f"tokens, over {report.get('num_sequences')} sequence(s) of {report.get('seq_length')} tokens "
              "(lower is better):")
    rows = []
    for name, score in (report.get("conditions") or {}).items():
        perplexity = score.get("perplexity")
        shown = f"{perplexity:.3f}" if isinstance(perplexity, int | float) else f"n/a ({score.get('note', '')})"
        rows.append(f"| {name} | {score.get('tokens')} | {shown} |")
    table = header + "\n\n| condition | scored tokens | perplexity |\n|---|---:|---:|\n" + "\n".join(rows)
    content = report.get("content_share") or report.get("context_gain") or {}  # the older reports' name
    net = report.get("net_share") or {}
    if net:
        lines = [f"| {ratio} | {gain['share']:.1%} | {gain['low']:.1%} .. {gain['high']:.1%} | "
                 + (f"{content[ratio]['share']:.1%} | {content[ratio]['low']:.1%} .. {content[ratio]['high']:.1%} |"
                    if ratio in content else "not measured | |")
                 for ratio, gain in net.items()]
        table += ("\n\nShares of the window-to-full-context gap in mean NLL, with 95% bootstrap intervals over "
                  "sequences: net, (no memory - own memory) / (no memory - full context), what reading the memory "
                  "gains; content, (memory of another text - own memory) / (no memory - full context), what the "
                  "memory holds of its own text:\n\n| ratio | net share | 95% interval | content share | 95% interval |"
                  "\n|---|---:|---|---:|---|\n" + "\n".join(lines))
    elif content:
        lines = [f"| {ratio} | {gain['share']:.1%} | {gain['low']:.1%} .. {gain['high']:.1%} |"
                 for ratio, gain in content.items()]
        table += ("\n\nContext gain: (memory of another text - own memory) / (no memory - full context) in mean "
                  "NLL, the share of the window-to-full-context gap closed by what the memory holds, with a 95% "
                  "bootstrap interval over sequences:\n\n| ratio | context gain | 95% interval |\n|---|---:|---|\n"
                  + "\n".join(lines))
    return table


def model_card(folder: str | Path, repo_id: str, eval_report: dict[str, Any] | None = None,
               license_id: str | None = None, title: str | None = None, base_name: str | None = None) -> str:
    """The README.md of a memory weights repository, filled from `folder` (verified first); `base_name`
    names the base model instead of the manifest (`ship_memory_weights(base=...)`)."""
    root = Path(folder)
    verify_memory_weights(root)
    manifest = json.loads((root / CONFIG).read_text(encoding="utf-8"))
    memory, base = manifest["memory_config"], manifest["base"] | ({"base_model": base_name} if base_name else {})
    projections = {"qkv": "query, key and value", "qkvo": "query, key, value and output"}.get(
        memory.get("memory_params"), str(memory.get("memory_params")))
    return CARD_TEMPLATE.format(
        front_matter=_front_matter(base["base_model"], license_id),
        title=title or f"{repo_id.split('/')[-1]}: memory weights for {base['base_model']}",
        base=base["base_model"],
        repo_id=repo_id,
        memory_description=f"memory-token {projections} projections in each of {base['num_layers']} layers, and "
                           "one memory embedding",
        window=memory.get("window"),
        ratios=", ".join(str(r) for r in memory.get("ratios", [])),
        ratio_mix=memory.get("ratio_mix"),
        attention=memory.get("attention"),
        memory_params=memory.get("memory_params"),
        embed_init=memory.get("embed_init"),
        trained_with=_trained_with(manifest),
        base_shape=(f"{base['model_type']}, {base['num_layers']} layers, hidden size {base['hidden_size']}, "
                    f"{base['num_key_value_heads']} key-value heads of dimension {base['head_dim']}"),
        training=_training_section(root),
        evaluation=_evaluation_section(eval_report),
        weights_sha256=manifest["weights_sha256"],
    )


def publish_memory_weights(folder: str | Path, repo_id: str, api=None, private: bool = False,
                           eval_report: dict[str, Any] | None = None, license_id: str | None = None,
                           commit_message: str | None = None) -> str:
    """Create (or reuse) the model repository `repo_id` and upload the weights and their card in one commit.

    `api` is a `huggingface_hub.HfApi` (made here when None; it reads the token that
    `hf auth login` stored, or $HF_TOKEN). Returns the commit's URL.
    """
    from huggingface_hub import CommitOperationAdd

    root = Path(folder)
    card = model_card(root, repo_id, eval_report=eval_report, license_id=license_id)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(root / name)) for name in (CONFIG, WEIGHTS)]
    operations.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode("utf-8")))
    commit = api.create_commit(repo_id, operations=operations, repo_type="model",
                               commit_message=commit_message or f"Memory weights from {root.name}")
    return str(getattr(commit, "commit_url", commit))


def _store_as(folder: Path, dtype: torch.dtype) -> None:
    """Rewrite the weights of a memory-weights folder in `dtype`, with the manifest's hash and dtype."""
    tensors = {key: value.to(dtype).contiguous() for key, value in load_file(str(folder / WEIGHTS)).items()}
    save_file(tensors, str(folder / WEIGHTS))
    manifest = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    manifest["weights_sha256"] = sha256_file(folder / WEIGHTS)
    manifest["weights_dtype"] = str(dtype).removeprefix("torch.")
    (folder / CONFIG).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def base_shape(name: str) -> dict[str, Any]:
    """The shape fields a weights manifest records of a base model, read from `name`'s config alone."""
    from transformers import AutoConfig

    from memorag.runtime.embedded import resolve_lm

    config = AutoConfig.from_pretrained(resolve_lm(name))
    config = getattr(config, "text_config", None) or config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return {"model_type": config.model_type, "num_layers": config.num_hidden_layers,
            "hidden_size": config.hidden_size, "num_key_value_heads": config.num_key_value_heads,
            "head_dim": head_dim}


def _check_base_shape(folder: Path, base: str) -> None:
    """Refuse `base` unless it has the shape the memory weights in `folder` record."""
    recorded = json.loads((folder / CONFIG).read_text(encoding="utf-8"))["base"]
    differences = {key: (recorded.get(key), value) for key, value in base_shape(base).items()
                   if recorded.get(key) != value}
    if differences:
        raise ValueError(f"{base} is not the base these weights were trained on: "
                         + "; ".join(f"{k}: weights {a!r}, {base} {b!r}" for k, (a, b) in differences.items()))


def _record_base(folder: Path, base: str) -> None:
    manifest = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    manifest["base"]["base_model"] = base
    (folder / CONFIG).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def ship_memory_weights(folder: str | Path, target: str | Path, runs: Sequence[str | Path] = (),
                        eval_files: Sequence[str | Path] = (), name: str | None = None,
                        dtype: str | None = None, base: str | None = None) -> Path:
    """Write `target` (atomically): the memory weights of `folder` with what reproduces and judges them.

    `target` gets `memory_config.json` and `memory_weights.safetensors` (verified first), the
    `train_config.yaml` saved beside them, `training_runs/RUN/{train_config.yaml,train_log.jsonl}` of each
    training run folder in `runs` (stage order), `eval/` with each of `eval_files`, and `README.md`,
    the model card (its evaluation from the first of `eval_files` that is a held-out report). This
    is how the weights shipped in `memorag/weights/` are made (README "The shipped memory").
    `dtype` (e.g. "bfloat16") stores the weights in that precision (half the size of float32;
    loading casts them back to the memory parameters' dtype); the manifest's hash follows.
    `base` records another name for the base model (checked to have the recorded shape): training
    that read an exact copy of a base from a folder (a time-boxed run's restored base) names the folder.
    """
    root = Path(folder)
    verify_memory_weights(root)
    reports = [json.loads(Path(path).read_text(encoding="utf-8")) for path in eval_files]
    heldout = next((report for report in reports if isinstance(report, dict) and "conditions" in report), None)
    if base is not None:
        _check_base_shape(root, base)
    card = model_card(root, name or Path(target).name, eval_report=heldout, base_name=base)
    for run in runs:
        if not (Path(run) / "train_log.jsonl").is_file():
            raise FileNotFoundError(f"{run} holds no train_log.jsonl: pass the training run's output folder")
    with atomic_directory(target, replaceable=lambda d: is_saved(d, CONFIG, FORMAT)) as staging:
        for file in (CONFIG, WEIGHTS, TRAIN_CONFIG):
            if (root / file).is_file():
                shutil.copyfile(root / file, staging / file)
        if dtype is not None:
            _store_as(staging, getattr(torch, dtype))
        if base is not None:
            _record_base(staging, base)
        for run in runs:
            where = staging / "training_runs" / Path(run).resolve().name
            where.mkdir(parents=True)
            for file in (TRAIN_CONFIG, "train_log.jsonl"):
                if (Path(run) / file).is_file():
                    shutil.copyfile(Path(run) / file, where / file)
        if eval_files:
            (staging / "eval").mkdir()
            for path in eval_files:
                shutil.copyfile(path, staging / "eval" / Path(path).name)
        (staging / "README.md").write_text(card, encoding="utf-8")
        for path in [staging, *staging.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
    verify_memory_weights(target)
    return Path(target)
