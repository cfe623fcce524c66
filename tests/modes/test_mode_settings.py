"""Each mode's settings are a section of `PipelineConfig` (`longrag.units`); the old flat names
(`longrag_units`) are still read, with a warning that names the new key."""

from __future__ import annotations

import pytest

from memorag.cli import _overrides, build_parser
from memorag.config import ConfigError, config_from_dict, config_to_dict, load_config
from memorag.modes.longrag import LongRAGSettings
from memorag.pipeline import PipelineConfig, available_modes, get_mode


def test_sections_are_set_with_dotted_keys_and_nested_mappings():
    config = load_config(PipelineConfig, None, ["longrag.units=2", "mixpr.router=rules", "dos.evidence_tokens=512"])
    assert (config.longrag.units, config.mixpr.router, config.dos.evidence_tokens) == (2, "rules", 512)
    assert config.longrag.max_tokens == LongRAGSettings().max_tokens  # the rest of the section keeps its defaults
    same = config_from_dict(PipelineConfig, {"longrag": {"units": 2}, "mixpr": {"router": "rules"},
                                             "dos": {"evidence_tokens": 512}})
    assert same == config and config_from_dict(PipelineConfig, config_to_dict(config)) == config


def test_an_old_flat_name_is_read_with_a_warning_naming_the_new_key():
    with pytest.warns(FutureWarning, match=r"'longrag_units' is deprecated: it is 'longrag\.units' now"):
        config = load_config(PipelineConfig, None, ["longrag_units=2"])
    assert config.longrag.units == 2
    with pytest.warns(FutureWarning, match=r"'hyde_query_weight'"):
        config = config_from_dict(PipelineConfig, {"hyde_query_weight": 3.0, "hyde": {"max_new_tokens": 9}})
    assert (config.hyde.query_weight, config.hyde.max_new_tokens) == (3.0, 9)
    with pytest.warns(FutureWarning), pytest.raises(ConfigError, match=r"cic\.examples=-1"):
        config_from_dict(PipelineConfig, {"cic_examples": -1})


def test_the_command_line_takes_both_spellings():
    parse = build_parser().parse_args
    new = _overrides(parse(["ask", "--context", "a.txt", "q", "--set", "longrag.units=1"]))
    with pytest.warns(FutureWarning):
        old = _overrides(parse(["ask", "--context", "a.txt", "q", "--set", "longrag_units=1"]))
    assert new == old == {"longrag": LongRAGSettings(units=1)}


def test_an_unknown_key_in_a_section_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown key 'longrag\.unit'.*did you mean 'units'.*max_tokens"):
        load_config(PipelineConfig, None, ["longrag.unit=2"])
    with pytest.raises(ConfigError, match=r"unknown key 'longrag_unit'"):
        load_config(PipelineConfig, None, ["longrag_unit=2"])


def test_every_mode_with_settings_has_its_section():
    for name in available_modes():
        mode = get_mode(name)
        if mode.settings_key is not None:
            settings = mode.settings_of(PipelineConfig())
            assert settings == getattr(PipelineConfig(), mode.settings_key), name
