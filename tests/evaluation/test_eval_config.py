"""Evaluation settings: the shipped configs build, and bad settings are clear errors before any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from memorag.config import ConfigError
from memorag.evaluation import load_eval_config
from memorag.evaluation.config import mode_task

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "eval"
TASKS = "tasks=[{name: niah_single, source: synthetic}]"


@pytest.mark.parametrize("name", ["smoke.yaml", "cpu-hour.yaml", "paper-7b.yaml", "rlgf-heldout.yaml"])
def test_shipped_configs_build(name):
    config = load_eval_config(CONFIGS / name)
    assert config.tasks and config.modes
    for task in config.tasks:
        assert config.task_lengths(task) and config.task_num_examples(task) >= 1


def test_unknown_key_names_the_closest_one():
    with pytest.raises(ConfigError, match="unknown key 'num_example'.*did you mean 'num_examples'"):
        load_eval_config(None, [TASKS, "num_example=3"])
    with pytest.raises(ConfigError, match=r"unknown key 'tasks\[0\].sorce'.*did you mean 'source'"):
        load_eval_config(None, ["tasks=[{name: x, sorce: synthetic}]"])


def test_unknown_mode_lists_the_registered_ones():
    with pytest.raises(ConfigError, match="unknown mode 'ragg'; available modes: .*rag"):
        load_eval_config(None, [TASKS, "modes=[ragg]"])
    with pytest.raises(ConfigError, match="does not do task 'summarize'"):
        load_eval_config(None, [TASKS, "modes=[hyde:summarize]"])


def test_unknown_task_source_or_generator_or_option():
    with pytest.raises(ConfigError, match="unknown source 'ruler'; choose one of synthetic"):
        load_eval_config(None, ["tasks=[{name: x, source: ruler}]"])
    with pytest.raises(ConfigError, match="unknown generated task 'niah_singel'"):
        load_eval_config(None, ["tasks=[{name: niah_singel, source: synthetic}]"])
    with pytest.raises(ConfigError, match="has no option depht; its options: .*depth"):
        load_eval_config(None, ["tasks=[{name: niah_single, source: synthetic, options: {depht: 0.5}}]"])
    with pytest.raises(ConfigError, match="reads files: set `path`"):
        load_eval_config(None, ["tasks=[{name: lb, source: longbench}]"])
    with pytest.raises(ConfigError, match="lengths fixed by its files"):
        load_eval_config(None, ["tasks=[{name: lb, source: examples, path: x.jsonl, lengths: [4096]}]"])
    with pytest.raises(ConfigError, match="not unique"):
        load_eval_config(None, ["tasks=[{name: a, source: synthetic, generator: hashhop},"
                                " {name: a, source: synthetic, generator: hashhop}]"])


def test_modes_that_cannot_do_a_task_kind_are_refused():
    with pytest.raises(ConfigError, match="cannot run a summarize task"):
        load_eval_config(None, ["tasks=[{name: s, source: examples, path: s.jsonl, kind: summarize}]",
                                "modes=[rag, 'memorag:qa']"])
    assert mode_task("memorag", "summarize") == "summarize"
    assert mode_task("memorag", "qa") == "memorag" and mode_task("memorag:qa", "qa") == "qa"


def test_other_bad_values():
    with pytest.raises(ConfigError, match="recall_k"):
        load_eval_config(None, [TASKS, "recall_k=[0]"])
    with pytest.raises(ConfigError, match="tasks is empty"):
        load_eval_config(None, [])
    with pytest.raises(ConfigError, match="name a mode twice"):
        load_eval_config(None, [TASKS, "modes=[rag, rag]"])
