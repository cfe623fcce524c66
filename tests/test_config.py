"""Typed configs: merge order, coercion, strict keys, round trips."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Literal

import pytest
import yaml

from memorag.config import (
    NAMED_ENTRIES,
    ConfigError,
    config_from_argv,
    config_from_dict,
    config_to_dict,
    format_config_help,
    load_config,
    parse_override,
    save_config,
)
from memorag.storage.io import atomic_write_bytes, atomic_write_text


class Precision(Enum):
    BF16 = "bf16"
    FP32 = "fp32"


@dataclass
class MemorySection:
    window: int = 2048
    ratios: list[int] = field(default_factory=lambda: [2, 4, 8])
    interleave: Literal["step", "segment"] = "step"
    beacon_dim: int | None = None

    def __post_init__(self) -> None:
        if self.window <= 0:
            raise ValueError(f"window must be positive, got {self.window}")


@dataclass
class OptimSection:
    lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.95)
    warmup: int = 100


@dataclass
class TrainConfig:
    name: str = "debug"
    seed: int = 0
    flag: bool = False
    out_dir: Path = Path("runs/debug")
    precision: Precision = Precision.BF16
    tags: list[str] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)
    memory: MemorySection = field(default_factory=MemorySection)
    optim: OptimSection = field(default_factory=lambda: OptimSection(lr=3e-4))
    eval_every: int | None = None


@dataclass
class Required:
    path: str
    steps: int = 1


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_defaults_without_file_or_overrides():
    cfg = load_config(TrainConfig)
    assert cfg == TrainConfig()
    assert cfg.optim.lr == 3e-4  # a nested default_factory with its own values


def test_merge_order_defaults_then_yaml_then_overrides(tmp_path):
    path = write_yaml(tmp_path / "c.yaml", {"seed": 1, "name": "from-yaml", "memory": {"window": 512}})
    cfg = load_config(TrainConfig, path, ["seed=2", "memory.ratios=[16, 32]"])
    assert cfg.seed == 2  # override beats YAML
    assert cfg.name == "from-yaml"  # YAML beats default
    assert cfg.memory.window == 512  # YAML, untouched by a sibling override
    assert cfg.memory.ratios == [16, 32]
    assert cfg.memory.interleave == "step"  # default kept inside a partly given section
    assert cfg.flag is False


def test_partial_section_keeps_the_parent_default_not_the_class_default(tmp_path):
    path = write_yaml(tmp_path / "c.yaml", {"optim": {"warmup": 5}})
    cfg = load_config(TrainConfig, path)
    assert cfg.optim.warmup == 5
    assert cfg.optim.lr == 3e-4  # from TrainConfig's factory, not OptimSection's 1e-4


def test_override_values_are_read_as_yaml_and_coerced():
    cfg = load_config(
        TrainConfig,
        overrides=[
            "optim.lr=5e-5",  # PyYAML reads this as a string
            "flag=true",
            "memory.beacon_dim=64",
            "optim.betas=[0.8, 0.9]",
            "eval_every=1e3",
            "precision=fp32",
            "out_dir=/tmp/x",
            "weights={a: 1, b: 0.5}",
        ],
    )
    assert cfg.optim.lr == pytest.approx(5e-5) and isinstance(cfg.optim.lr, float)
    assert cfg.flag is True
    assert cfg.memory.beacon_dim == 64
    assert cfg.optim.betas == (0.8, 0.9)
    assert cfg.eval_every == 1000 and isinstance(cfg.eval_every, int)
    assert cfg.precision is Precision.FP32
    assert cfg.out_dir == Path("/tmp/x")
    assert cfg.weights == {"a": 1.0, "b": 0.5} and all(isinstance(v, float) for v in cfg.weights.values())


def test_string_fields_keep_the_text_as_typed():
    cfg = load_config(TrainConfig, overrides=["name=007", "tags=[a, 2024]"])
    assert cfg.name == "007"
    assert cfg.tags == ["a", "2024"]  # inside a list the YAML reading is used; numbers become text
    assert load_config(TrainConfig, overrides=["name=on"]).name == "on"
    with pytest.raises(ConfigError, match=r"tags\[0\]: expected str, got bool"):
        load_config(TrainConfig, overrides=["tags=[on]"])  # YAML 1.1 reads `on` as true: say so


def test_optional_accepts_null():
    cfg = load_config(TrainConfig, overrides=["memory.beacon_dim=4", "eval_every=null"])
    assert cfg.eval_every is None
    cfg = load_config(TrainConfig, overrides=["memory.beacon_dim=null"])
    assert cfg.memory.beacon_dim is None


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("seed=abc", "seed: expected int"),
        ("flag=maybe", "flag: expected bool"),
        ("memory.ratios=4", "memory.ratios: expected list[int]"),
        ("memory.ratios=[1, x]", "memory.ratios[1]: expected int"),
        ("optim.betas=[0.9]", "expected 2 items"),
        ("memory.interleave=segmnt", "did you mean 'segment'"),
        ("precision=fp8", "not one of 'bf16', 'fp32'"),
        ("seed=1.5", "seed: expected int"),
        ("eval_every=[1]", "does not fit any of"),
    ],
)
def test_type_errors_name_the_key(override, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(TrainConfig, overrides=[override])
    assert fragment in str(info.value)


def test_unknown_override_key_names_section_valid_keys_and_suggestion():
    with pytest.raises(ConfigError) as info:
        load_config(TrainConfig, overrides=["memory.windw=1024"])
    message = str(info.value)
    assert "'memory.windw'" in message
    assert "section 'memory' (MemorySection)" in message
    assert "did you mean 'window'?" in message
    assert "Valid keys: window, ratios, interleave, beacon_dim" in message


def test_unknown_yaml_key_at_top_level(tmp_path):
    path = write_yaml(tmp_path / "c.yaml", {"sed": 3})
    with pytest.raises(
        ConfigError, match=r"unknown key 'sed' in the top level \(TrainConfig\); did you mean 'seed'"
    ):
        load_config(TrainConfig, path)


def test_unknown_section_gets_a_suggestion():
    with pytest.raises(ConfigError, match="did you mean 'memory'"):
        load_config(TrainConfig, overrides=["memroy.window=3"])


def test_dotted_override_through_a_scalar_is_an_error():
    with pytest.raises(ConfigError, match="'seed' is 3, not a section"):
        load_config(TrainConfig, overrides=["seed=3", "seed.x=1"])


def test_malformed_override():
    with pytest.raises(ConfigError, match="must look like key=value"):
        parse_override("seed")
    with pytest.raises(ConfigError, match="must look like key=value"):
        parse_override("memory..window=3")


def test_post_init_validation_runs_for_nested_sections():
    with pytest.raises(ConfigError, match="window must be positive"):
        load_config(TrainConfig, overrides=["memory.window=0"])


def test_missing_required_field():
    with pytest.raises(ConfigError, match="missing required key"):
        config_from_dict(Required, {"steps": 2})
    assert config_from_dict(Required, {"path": "a"}) == Required(path="a")


def test_config_from_dict_is_strict():
    with pytest.raises(ConfigError, match="unknown key 'memory.extra'"):
        config_from_dict(TrainConfig, {"memory": {"extra": 1}})
    with pytest.raises(ConfigError, match="must be a mapping"):
        config_from_dict(TrainConfig, {"memory": 3})


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_round_trip(tmp_path, suffix):
    cfg = load_config(
        TrainConfig,
        overrides=[
            "name=run-1",
            "precision=fp32",
            "optim.betas=[0.5, 0.6]",
            "memory.ratios=[3]",
            "tags=[a, b]",
            "weights={x: 2.5}",
            "out_dir=/data/out",
            "eval_every=10",
        ],
    )
    path = save_config(cfg, tmp_path / f"config{suffix}")
    assert load_config(TrainConfig, path) == cfg
    text = path.read_text(encoding="utf-8")
    plain = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    assert plain == config_to_dict(cfg)
    assert plain["precision"] == "fp32" and plain["optim"]["betas"] == [0.5, 0.6]
    assert config_from_dict(TrainConfig, plain) == cfg


def test_save_rejects_unknown_extension(tmp_path):
    with pytest.raises(ConfigError, match=r"\.yaml, \.yml or \.json"):
        save_config(TrainConfig(), tmp_path / "config.toml")


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(TrainConfig, tmp_path / "absent.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(TrainConfig, tmp_path / "list.yaml")
    (tmp_path / "empty.yaml").write_text("")
    assert load_config(TrainConfig, tmp_path / "empty.yaml") == TrainConfig()


def test_argv_and_help(tmp_path, capsys):
    path = write_yaml(tmp_path / "c.yaml", {"seed": 5})
    cfg = config_from_argv(TrainConfig, ["--config", str(path), "memory.window=64"])
    assert (cfg.seed, cfg.memory.window) == (5, 64)
    assert config_from_argv(TrainConfig, [f"--config={path}"]).seed == 5
    with pytest.raises(ConfigError, match="unknown option"):
        config_from_argv(TrainConfig, ["--seed", "3"])
    with pytest.raises(SystemExit):
        config_from_argv(TrainConfig, ["--help"])
    shown = capsys.readouterr().out
    assert "memory.window: int = 2048" in shown
    assert "optim.lr: float = 0.0003" in shown
    assert format_config_help(Required).splitlines()[1] == "  path: str = (required)"


def test_atomic_writes(tmp_path):
    target = atomic_write_text(tmp_path / "sub" / "a.txt", "hello")
    assert target.read_text() == "hello"
    atomic_write_bytes(target, b"bye")
    assert target.read_bytes() == b"bye"
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.txt"]  # no temp files left


SHAPES = {"small": {"width": 2, "depth": 1}, "large": {"width": 8, "depth": 4}}


@dataclass
class ShapedSection:
    shape: dict[str, int] = field(default_factory=dict, metadata={NAMED_ENTRIES: SHAPES})
    label: str = "x"


def test_a_named_entry_stands_for_its_fields_wherever_the_value_comes_from(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("shape: small\n")
    assert load_config(ShapedSection, file).shape == {"width": 2, "depth": 1}
    assert load_config(ShapedSection, file, ["shape=large"]).shape == {"width": 8, "depth": 4}
    assert load_config(ShapedSection, None, ["shape={width: 3, depth: 3}"]).shape == {"width": 3, "depth": 3}
    assert config_from_dict(ShapedSection, {"shape": "large"}).shape is not SHAPES["large"]  # a copy
    with pytest.raises(ConfigError, match="shape: unknown name 'smal'; known names: large, small; did you mean 'small'"):
        load_config(ShapedSection, None, ["shape=smal"])
    assert load_config(ShapedSection, None, ["label=small"]).label == "small"  # only fields with the metadata
    assert "(or a name: large, small)" in format_config_help(ShapedSection)
