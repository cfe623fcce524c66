"""Join the shards of a sharded run (``shards``) into the results an unsharded run writes.

    cells, report = merge_shards(load_eval_config("configs/eval/paper-7b.yaml"), command="...")

The config must be the one the shards ran with (``shard`` aside): it names the cells, and every
record must carry the fingerprint that config gives its cell. Nothing is merged unless every shard
is there and complete; the error names each shard that is missing or unfinished and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memorag.config import config_from_dict, config_to_dict, save_config
from memorag.evaluation.config import EvalConfig
from memorag.evaluation.results_store import CONFIG_FILE, MODELS_FILE, PROMPTS_FILE, CellKey, ResultStore
from memorag.evaluation.runner import EvalError, EvalRunner, Models
from memorag.evaluation.shards import Shard, ShardManifest, part_key, shard_folders
from memorag.evaluation.summary import summarize_cell
from memorag.storage.io import atomic_write_text


def _shard_count(config: EvalConfig) -> int:
    found = shard_folders(config.out_dir)
    if not found:
        raise EvalError(f"{Path(config.out_dir) / 'shards'} holds no shards to merge: run the shards first "
                        "(python eval/run.py --config C shard=I/N, for I from 0 to N-1)")
    if len(found) > 1:
        sets = "; ".join(f"{count} shards ({', '.join(f'{i}-of-{count}' for i in sorted(indices))})"
                         for count, indices in sorted(found.items()))
        raise EvalError(f"{Path(config.out_dir) / 'shards'} holds shards of different splits: {sets}; remove the "
                        "folders of the split you do not want, then merge again")
    return next(iter(found))


def _wanted_parts(config: EvalConfig) -> list[tuple[Any, int | None]]:
    return [(task, length) for task in config.tasks if config.task_modes(task) for length in config.task_lengths(task)]


def _problems(config: EvalConfig, shard: Shard, runner: EvalRunner) -> tuple[list[str], ShardManifest | None]:
    """What keeps `shard` from being merged (nothing: complete), and its manifest."""
    directory = shard.directory(config.out_dir)
    if not directory.is_dir():
        return [f"missing (no folder {directory})"], None
    manifest = ShardManifest(directory, shard)
    store = ResultStore(directory)
    problems = []
    for task, length in _wanted_parts(config):
        part = manifest.part(task.name, length)
        requested = config.task_num_examples(task)
        if part is None:
            problems.append(f"task {task.name!r} at length {length} not started")
            continue
        if part["requested"] != requested:
            problems.append(f"task {task.name!r} at length {length} ran with num_examples={part['requested']}, "
                            f"this config asks for {requested}")
            continue
        other, short = [], []
        for label in config.task_modes(task):
            fingerprint = runner.fingerprint(label, task)
            records = store.records((label, task.name, length), part["owned"])
            if any(record["fingerprint"] != fingerprint for record in records):
                other.append(label)
            elif len(records) != len(part["owned"]):
                short.append(f"{label} {len(records)}")
        where = f"task {task.name!r} at length {length}"
        if other:
            problems.append(f"{where}: modes {', '.join(other)} ran with other settings than this config "
                            "(merge with the config and overrides the shards ran with)")
        if short:
            problems.append(f"{where}: of {len(part['owned'])} questions recorded {', '.join(short)}")
    if not problems and not manifest.complete:
        problems.append("its run has not finished")
    return problems, manifest


def _same_file(shards: list[Shard], config: EvalConfig, name: str) -> str:
    texts = {shard: (shard.directory(config.out_dir) / name).read_text(encoding="utf-8") for shard in shards}
    if len(set(texts.values())) > 1:
        raise EvalError(f"the shards' {name} differ ({', '.join(str(s) for s in shards)}): the shards ran with "
                        "other models or another version of the package; rerun the odd ones")
    return texts[shards[0]]


def _complete_manifests(config: EvalConfig, shards: list[Shard], runner: EvalRunner) -> dict[Shard, ShardManifest]:
    """Each shard's manifest; raises `EvalError` naming every shard missing or incomplete."""
    manifests: dict[Shard, ShardManifest] = {}
    refused = []
    for shard in shards:
        problems, manifest = _problems(config, shard, runner)
        if problems:
            refused.append(f"shard {shard} is {'missing' if manifest is None else 'incomplete'}: "
                           + "; ".join(problems))
        else:
            manifests[shard] = manifest
    if refused:
        raise EvalError("cannot merge " + str(Path(config.out_dir)) + ":\n  " + "\n  ".join(refused)
                        + "\nrun each of them (python eval/run.py --config C shard=I/N; a rerun resumes), then merge")
    return manifests


def _owners(task: str, length: int | None, manifests: list[ShardManifest], shards: list[Shard]
            ) -> tuple[dict[str, Shard], list[str]]:
    """Which shard owns each example of the part (`task` at `length`), and the part's examples;
    raises `EvalError` when the shards built different examples or do not cover them once each."""
    parts = [manifest.parts[part_key(task, length)] for manifest in manifests]
    example_ids = parts[0]["example_ids"]
    if any(part["example_ids"] != example_ids for part in parts):
        raise EvalError(f"the shards built different examples for task {task!r} at length {length}: "
                        "their data files or package versions differ; rerun them on the same data")
    owner = {example_id: shard for shard, part in zip(shards, parts) for example_id in part["owned"]}
    if sorted(owner) != sorted(example_ids) or sum(len(part["owned"]) for part in parts) != len(example_ids):
        raise EvalError(f"the shards' parts of task {task!r} at length {length} do not cover its "
                        "examples once each; rerun the shards of one split")
    return owner, example_ids


def _merge_cell(runner: EvalRunner, out: ResultStore, cell: CellKey, task: Any, example_ids: list[str],
                owners: list[ResultStore]) -> None:
    """Copy the cell's records of `example_ids` from the shards that own them (`owners`, one per
    example) into `out`, and summarize it."""
    fingerprint = runner.fingerprint(cell[0], task)
    out.check(cell, fingerprint)
    records = [store.records(cell, [example_id])[0] for example_id, store in zip(example_ids, owners, strict=True)]
    for record in records:
        if not out.has(cell, record["example_id"]):
            out.add(record)
    out.finish(summarize_cell(out.records(cell, example_ids), fingerprint=fingerprint,
                              requested=runner.config.task_num_examples(task), num_examples=len(example_ids)))


def merge_shards(config: EvalConfig, command: str = "", models: Models | None = None
                 ) -> tuple[list[dict[str, Any]], Path]:
    """Merge ``OUT/shards/*`` into ``OUT``; returns the cells and the report's path. `models`: the models
    the shards were given (e.g. test fakes), which their fingerprints name; none is loaded."""
    from memorag.evaluation.plots import write_plots
    from memorag.evaluation.report import write_report

    if config.shard is not None:
        raise EvalError(f"--merge joins every shard; remove shard={config.shard}")
    count = _shard_count(config)
    shards = [Shard(index, count) for index in range(count)]
    runner = EvalRunner(config, models)  # names the cells and their fingerprints; loads no model
    manifests = _complete_manifests(config, shards, runner)
    models = json.loads(_same_file(shards, config, MODELS_FILE))
    prompts = _same_file(shards, config, PROMPTS_FILE)
    stores = {shard: ResultStore(shard.directory(config.out_dir)) for shard in shards}
    out = runner.store  # the run's own folder
    out.check_models(models)
    wanted: list[CellKey] = []
    for task, length in _wanted_parts(config):
        owner, example_ids = _owners(task.name, length, [manifests[shard] for shard in shards], shards)
        for label in config.task_modes(task):
            cell = (label, task.name, length)
            _merge_cell(runner, out, cell, task, example_ids, [stores[owner[example]] for example in example_ids])
            wanted.append(cell)
    merged = config_from_dict(EvalConfig, {**config_to_dict(config), "shard": None})
    save_config(merged, out.directory / CONFIG_FILE)
    atomic_write_text(out.directory / PROMPTS_FILE, prompts)
    by_key = {(c["mode"], c["task"], c["length"]): c for c in out.cells()}
    cells = [by_key[key] for key in wanted]
    plots = write_plots(out.directory, cells) if config.plots else []
    report = write_report(out.directory, cells, config.recall_k, command=command, plots=plots, models=models)
    return cells, report
