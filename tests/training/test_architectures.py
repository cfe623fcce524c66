"""Architectures are declared once (memorag/runtime/architectures.py) and named from the YAMLs; a named
config resolves to exactly the config that spelled the fields out, so old runs still resume."""

from __future__ import annotations

import itertools
import re

import pytest

from memorag.config import ConfigError, format_config_help, load_config, save_config
from memorag.runtime.architectures import ARCHITECTURES
from memorag.training.config import TrainConfig
from tests.training.helpers import ROOT

CONFIGS = ROOT / "configs"
NAMED = re.compile(r"^(  architecture: )([a-z0-9.-]+)\b.*$", re.M)

# The blocks the YAMLs held before the architectures were named, verbatim.
OLD_BLOCKS = {
    "smollm2-135m": """{model_type: llama, hidden_size: 576, intermediate_size: 1536, num_hidden_layers: 30,
                 num_attention_heads: 9, num_key_value_heads: 3, max_position_embeddings: 8192,
                 vocab_size: 49152, rope_theta: 100000.0, tie_word_embeddings: true,
                 bos_token_id: 1, eos_token_id: 2}""",
    "qwen2-7b-instruct": """{model_type: qwen2, hidden_size: 3584, intermediate_size: 18944, num_hidden_layers: 28,
                 num_attention_heads: 28, num_key_value_heads: 4, max_position_embeddings: 32768,
                 vocab_size: 152064, rope_theta: 1000000.0, rms_norm_eps: 1.0e-6, tie_word_embeddings: false,
                 use_sliding_window: false, bos_token_id: 151643, eos_token_id: 151645}""",
    "mistral-7b-instruct-v0.2": """{model_type: mistral, hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32,
                 num_attention_heads: 32, num_key_value_heads: 8, max_position_embeddings: 32768,
                 vocab_size: 32000, rope_theta: 1000000.0, rms_norm_eps: 1.0e-5, tie_word_embeddings: false,
                 sliding_window: null, bos_token_id: 1, eos_token_id: 2}""",
}
NAMING = sorted(path for path in CONFIGS.rglob("*.yaml") if NAMED.search(path.read_text(encoding="utf-8")))


def _spelled_out(path, tmp_path):
    """The YAML as it was before: the name replaced by the old block."""
    text = path.read_text(encoding="utf-8")
    old = NAMED.sub(lambda match: match.group(1) + OLD_BLOCKS[match.group(2)], text)
    target = tmp_path / path.name
    target.write_text(old, encoding="utf-8")
    return target


def test_the_training_and_model_configs_name_their_architecture():
    names = {NAMED.search(path.read_text(encoding="utf-8")).group(2) for path in NAMING}
    assert len(NAMING) >= 12 and names == set(ARCHITECTURES) == set(OLD_BLOCKS)
    spelled = [path for path in CONFIGS.rglob("*.yaml") if re.search(r"architecture: \{", path.read_text())]
    assert not spelled, f"spelled-out architecture blocks left: {spelled}"


@pytest.mark.parametrize("path", NAMING, ids=lambda path: str(path.relative_to(CONFIGS)))
def test_a_named_architecture_resolves_to_the_config_it_replaced(path, tmp_path):
    named = load_config(TrainConfig, path)
    assert named == load_config(TrainConfig, _spelled_out(path, tmp_path))
    # a run's saved config (what a checkpoint holds) reloads to the same config, fields spelled out
    saved = save_config(named, tmp_path / "train_config.yaml")
    assert "architecture:\n    model_type:" in saved.read_text(encoding="utf-8")
    assert load_config(TrainConfig, saved) == named


def test_a_name_gives_a_copy_and_overrides_name_one_too(tmp_path):
    cfg = load_config(TrainConfig, CONFIGS / "pretrain" / "qwen2-7b.yaml", ["model.architecture=mistral-7b-instruct-v0.2"])
    assert cfg.model.architecture == ARCHITECTURES["mistral-7b-instruct-v0.2"]
    cfg.model.architecture["num_hidden_layers"] = 1
    assert ARCHITECTURES["mistral-7b-instruct-v0.2"]["num_hidden_layers"] == 32


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"model.architecture: unknown name 'qwen2-7b'; known names: "
                                          r"mistral-7b-instruct-v0.2, qwen2-7b-instruct, smollm2-135m; "
                                          r"did you mean 'qwen2-7b-instruct'\?"):
        load_config(TrainConfig, CONFIGS / "debug.yaml", ["model.architecture=qwen2-7b"])


def test_help_lists_the_names():
    lines = format_config_help(TrainConfig).splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("  model.architecture:"))
    heading = " ".join([lines[start], *itertools.takewhile(lambda line: line.startswith(" " * 8), lines[start + 1:])])
    assert all(name in heading for name in ARCHITECTURES)  # the key's line, wrapped under it
