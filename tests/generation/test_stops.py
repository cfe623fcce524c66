"""One stop-token rule for the memory model and the local generator."""

from types import SimpleNamespace

from memorag.generation import LocalGenerator
from memorag.runtime.stop_tokens import stop_token_ids
from tests.memory.conftest import tiny_memory_model
from tests.memory.test_persistence import tiny_tokenizer


def test_the_rule_reads_tokenizer_generation_config_and_config_in_order_without_repeats():
    tokenizer = SimpleNamespace(eos_token_id=7)
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[7, 9]), config=SimpleNamespace(eos_token_id=3))
    assert stop_token_ids(tokenizer, model) == [7, 9, 3]
    assert stop_token_ids(None, SimpleNamespace(config=SimpleNamespace(eos_token_id=None))) == []
    assert stop_token_ids(SimpleNamespace(eos_token_id=None), SimpleNamespace(config=SimpleNamespace(eos_token_id=[4, None]))) == [4]


def test_the_memory_model_and_the_local_generator_stop_on_the_same_ids():
    model = tiny_memory_model("llama")
    model.tokenizer = tiny_tokenizer()
    model.base_model.generation_config.eos_token_id = [1, 5]
    generator = LocalGenerator.from_memory_model(model)
    assert model.stop_ids() == generator._stop_ids() == [1, 5]
