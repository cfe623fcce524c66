"""The cache travels under the one name the installed transformers documents (memorag/runtime/cache_argument.py)."""

from __future__ import annotations

import dataclasses

import pytest
from transformers.modeling_outputs import CausalLMOutputWithPast

from memorag.runtime.cache_argument import CACHE_ARGUMENT, cache_kwargs, pop_cache


def test_the_name_is_the_one_the_model_outputs_carry():
    fields = {field.name for field in dataclasses.fields(CausalLMOutputWithPast)}
    assert CACHE_ARGUMENT in fields and CACHE_ARGUMENT in {"cache", "past_key_values"}
    assert cache_kwargs(None) == {} and cache_kwargs("c") == {CACHE_ARGUMENT: "c"}


def test_a_cache_is_found_under_either_name_and_refused_twice():
    kwargs = {"past_key_values": "old", "other": 1}
    assert pop_cache(kwargs) == "old" and kwargs == {"other": 1}
    assert pop_cache({"cache": "new", "past_key_values": None}) == "new"
    assert pop_cache({}) is None
    with pytest.raises(ValueError, match="given twice"):
        pop_cache({"cache": "a", "past_key_values": "b"})
