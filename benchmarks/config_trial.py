"""A side-by-side trial of three ways to build the project's typed configs from YAML and `key=value`
overrides: our own loader (memorag.config), pydantic's TypeAdapter over the same dataclasses, and
transformers' HfArgumentParser. The same cases run through each on the real `TrainConfig` and
`configs/debug.yaml`; the output is one JSON record per case and a summary of lines of code.

    python benchmarks/config_trial.py --out /tmp/trial.json

What each case checks (CONTRIBUTING.md, "Configs", states the decision taken from it):
  round trip     load debug.yaml, save it, load the saved file: the same config
  override       `memory.window=128 optim.lr=5e-4` on top of the file
  misspelt key   `memory.windw=128`: the error must name the key and the fix
  wrong type     `memory.window=big`
  bad choice     `optim.schedule=cosin` (a Literal)
  bool as text   `model.gradient_checkpointing=maybe`
  named entry    `model.architecture=qwen2-7b-instruct` (a name standing for a table entry)
  post-init      `memory.ratio_mix=fixed` with three ratios (the dataclass's own check)
  float text     `optim.lr=5e-5` (PyYAML reads 5e-5, without a dot, as a string)
  int as 1e3     `optim.max_steps=1e3` (a whole number written as a float)
  text as typed  `model.base=007` (a text field: the text as typed, not YAML's number 7)
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEBUG_YAML = ROOT / "configs" / "debug.yaml"

CASES: dict[str, list[str]] = {
    "override": ["memory.window=128", "optim.lr=5e-4"],
    "misspelt key": ["memory.windw=128"],
    "wrong type": ["memory.window=big"],
    "bad choice": ["optim.schedule=cosin"],
    "bool as text": ["model.gradient_checkpointing=maybe"],
    "named entry": ["model.architecture=qwen2-7b-instruct"],
    "post-init": ["memory.ratio_mix=fixed"],
    "float text": ["optim.lr=5e-5"],
    "int as 1e3": ["optim.max_steps=1e3"],
    "text as typed": ["model.base=007"],
}


def ours(overrides: list[str]) -> Any:
    from memorag.config import load_config
    from memorag.training.config import TrainConfig

    return load_config(TrainConfig, DEBUG_YAML, overrides)


def with_pydantic(overrides: list[str]) -> Any:
    """The file and the overrides merged as plain data (YAML-read values, dotted keys set), then
    validated by pydantic against the same dataclasses, unknown keys forbidden (adopting it would
    put `__pydantic_config__ = ConfigDict(extra="forbid")` on each config dataclass; the trial sets
    it on the classes for the length of the run)."""
    import yaml
    from pydantic import TypeAdapter

    from memorag.training.config import TrainConfig

    data = yaml.safe_load(DEBUG_YAML.read_text(encoding="utf-8"))
    for item in overrides:
        key, _, raw = item.partition("=")
        node = data
        *sections, leaf = key.split(".")
        for section in sections:
            node = node.setdefault(section, {})
        node[leaf] = yaml.safe_load(raw)
    _forbid_extra(TrainConfig)
    return TypeAdapter(TrainConfig).validate_python(data)


def _forbid_extra(cls: type) -> None:
    import typing

    from pydantic import ConfigDict

    cls.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    for hint in typing.get_type_hints(cls).values():
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            _forbid_extra(hint)


def with_hf_parser(overrides: list[str]) -> Any:
    """transformers' parser over the same dataclass, given the file's mapping (`parse_dict`)."""
    import yaml
    from transformers import HfArgumentParser

    from memorag.training.config import TrainConfig

    data = yaml.safe_load(DEBUG_YAML.read_text(encoding="utf-8"))
    for item in overrides:
        key, _, raw = item.partition("=")
        data[key] = yaml.safe_load(raw)
    (cfg,) = HfArgumentParser(TrainConfig).parse_dict(data)
    return cfg


def round_trip(build: Callable[[list[str]], Any], tmp: Path) -> dict[str, Any]:
    from memorag.config import load_config, save_config
    from memorag.training.config import TrainConfig

    cfg = build([])
    saved = save_config(cfg, tmp / "config.yaml")
    return {"same": load_config(TrainConfig, saved) == cfg}


def run_case(build: Callable[[list[str]], Any], overrides: list[str]) -> dict[str, Any]:
    try:
        cfg = build(overrides)
    except Exception as error:  # the trial records whatever each library raises, as its user would see it
        return {"built": False, "error": f"{type(error).__name__}: {error}"[:1200]}
    shown = {item.split("=")[0]: _dotted(cfg, item.split("=")[0]) for item in overrides}
    return {"built": True, "values": {key: repr(value)[:120] for key, value in shown.items()}}


def _dotted(cfg: Any, key: str) -> Any:
    for part in key.split("."):
        cfg = getattr(cfg, part, "<missing>")
    return cfg


def lines_of(function: Callable[..., Any]) -> int:
    return len(inspect.getsource(function).splitlines())


def our_engine_lines() -> int:
    """The part of memorag/config.py that checks and coerces values against annotations."""
    import memorag.config as config

    names = ["_type_name", "_fail", "_is_exact", "_coerce", "_coerce_union", "_coerce_literal",
             "_coerce_collection", "_coerce_int", "_coerce_float", "_coerce_enum"]
    return sum(lines_of(getattr(config, name)) for name in names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the JSON record to write")
    args = parser.parse_args(argv)
    import tempfile

    builders = {"ours": ours, "pydantic": with_pydantic, "hf_argument_parser": with_hf_parser}
    record: dict[str, Any] = {"cases": {}, "lines": {
        "ours: coercion engine in memorag/config.py": our_engine_lines(),
        "pydantic: glue in this trial": lines_of(with_pydantic) + lines_of(_forbid_extra),
        "hf_argument_parser: glue in this trial": lines_of(with_hf_parser),
    }}
    for name, build in builders.items():
        results = {case: run_case(build, overrides) for case, overrides in CASES.items()}
        with tempfile.TemporaryDirectory() as tmp:
            try:
                results["round trip"] = round_trip(build, Path(tmp))
            except Exception as error:  # recorded as the trial's finding for that library
                results["round trip"] = {"same": False, "error": f"{type(error).__name__}: {error}"[:600]}
        record["cases"][name] = results
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    for name, results in record["cases"].items():
        print(f"== {name}")
        for case, result in results.items():
            print(f"  {case:14s} {json.dumps(result)[:300]}")
    print(json.dumps(record["lines"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
