"""The training settings table of the CLI reference is written from the settings' own descriptions
(the string under each field); every setting must have one."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from memorag.config import config_settings, format_config_help
from memorag.training.config import TrainConfig

SPEC = importlib.util.spec_from_file_location(
    "_docs_cli_reference", Path(__file__).resolve().parents[1] / "docs" / "hooks" / "cli_reference.py")
cli_reference = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(cli_reference)


@dataclass
class FakeInner:
    depth: int = 2
    """How deep it goes."""


@dataclass
class FakeSettings:
    name: str = "x"
    """What it is called,
    over two lines."""
    undescribed: int = 0
    inner: FakeInner = field(default_factory=FakeInner)


def test_every_training_setting_is_described():
    missing = [s.key for s in config_settings(TrainConfig) if not s.description]
    assert not missing, f"settings with no description (write one under the field): {missing}"


def test_descriptions_are_read_from_the_string_under_each_field():
    by_key = {s.key: s for s in config_settings(FakeSettings)}
    assert by_key["name"].description == "What it is called, over two lines."
    assert by_key["undescribed"].description == ""
    assert by_key["inner.depth"].description == "How deep it goes."
    assert by_key["inner.depth"].default == "2"


def test_help_shows_each_description_under_its_key():
    lines = format_config_help(FakeSettings).splitlines()
    assert lines[1:3] == ["  name: str = 'x'", "      What it is called, over two lines."]
    assert lines[3] == "  undescribed: int = 0"


def test_the_cli_reference_tables_every_training_setting():
    table = "\n".join(cli_reference._settings_table())
    for setting in config_settings(TrainConfig):
        assert f"| `{setting.key}`<br>" in table
        assert setting.description.replace("|", "\\|") in table
