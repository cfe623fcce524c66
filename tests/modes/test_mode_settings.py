"""Each mode's settings are a section of `PipelineConfig` (`longrag.units`); the old flat names
(`longrag_units`) are still read, with a warning that names the new key."""

from __future__ import annotations

import pytest

from memorag.commands.main import _overrides, build_parser
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


def test_the_settings_views_are_read_from_the_config_by_name():
    """SharedSettings, EvidenceSettings and MemoRAGSettings: every field is the `PipelineConfig` field
    of the same name, whatever the order (each setting given a value no other field has)."""
    import dataclasses

    from memorag.config import config_view
    from memorag.modes.context import SharedSettings
    from memorag.modes.evidence import EvidenceSettings
    from memorag.modes.memorag import MemoRAGSettings

    config = PipelineConfig(language="zh", chunk_tokens=41, overlap_tokens=7, hits_per_query=5, evidence_tokens=333,
                            answer_max_new_tokens=77, retriever="bm25", fusion="score", summary_max_new_tokens=99,
                            clue_kinds=["draft", "spans"], max_clues=3, clue_max_new_tokens=21,
                            memorag_evidence="fusion", memorag_hits=2, query_weight=1.5)
    views = [config_view(SharedSettings, config), config_view(EvidenceSettings, config),
             get_mode("memorag").settings_of(config)]
    assert isinstance(views[2], MemoRAGSettings)
    for view in views:
        for f in dataclasses.fields(view):
            expected = getattr(config, f.name)
            assert getattr(view, f.name) == (tuple(expected) if isinstance(expected, list) else expected), f.name


def test_a_view_with_a_field_the_config_lacks_is_refused():
    from dataclasses import dataclass

    from memorag.config import config_view

    @dataclass(frozen=True)
    class Reordered:
        retriever: str
        chunk_tokens: int

    assert config_view(Reordered, PipelineConfig(chunk_tokens=50)) == Reordered("dense", 50)

    @dataclass(frozen=True)
    class Stray:
        chunk_tokens: int
        chunk_size: int

    with pytest.raises(ConfigError, match="Stray.chunk_size has no field of the same name in PipelineConfig"):
        config_view(Stray, PipelineConfig())


def test_a_mode_is_registered_in_one_place():
    """Every `Mode` subclass defined in memorag/modes is available by its name without any list
    naming its module, in a fresh interpreter."""
    import inspect
    import subprocess
    import sys

    from memorag.modes.base import Mode, mode_modules

    defined = {cls.name for module in mode_modules() for cls in vars(__import__(module, fromlist=["_"])).values()
               if inspect.isclass(cls) and issubclass(cls, Mode) and cls.__module__ == module and hasattr(cls, "name")}
    assert defined == {"memorag", "memorag-full", "memorag-lite", "rag", "longrag", "mixpr", "cic", "full", "hyde", "rqrag", "dos"}
    listed = subprocess.run([sys.executable, "-c", "from memorag.modes import available_modes; "
                             "print(' '.join(available_modes()))"], capture_output=True, text=True, check=True)
    assert set(listed.stdout.split()) == defined == set(available_modes())
