"""The memorag mode writes its clue kinds as one batch over the memory, equal to writing them one by one."""

import logging
from types import SimpleNamespace

import pytest

from memorag.modes.memorag import MemoRAGMode, MemoRAGSettings
from tests.memory.conftest import tiny_memory_model
from tests.memory.test_persistence import tiny_tokenizer, word


@pytest.fixture(scope="module")
def context():
    model = tiny_memory_model("llama", seed=4, window=32, ratios=[4])
    model.tokenizer = tiny_tokenizer()
    memory = model.memorize(" ".join(word(2 + (i * 11) % 90) for i in range(75)))
    settings = MemoRAGSettings(clue_kinds=("spans", "questions", "draft"), max_clues=8, clue_max_new_tokens=40,
                               memorag_evidence="union", memorag_hits=3, query_weight=1.0, answer_max_new_tokens=16)
    return SimpleNamespace(memory_model=model, memory=memory, settings=settings)


def test_clue_kinds_decoded_as_one_batch_equal_one_by_one(context, caplog):
    mode = MemoRAGMode()
    query = " ".join(word(i) for i in (5, 17, 33))
    one = mode.write_clues(context, query, "memorag", "en", decoding="one-by-one")
    with caplog.at_level(logging.INFO, logger="memorag.memory.decoding"):
        batch = mode.write_clues(context, query, "memorag", "en")
    assert batch == one and set(one[1]) == {"spans", "questions", "draft"} and any(one[1].values())
    assert "decoding 3 prompts as one batch" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memorag.memory.decoding"):
        mode.write_clues(context, query, "memorag", "en", decoding="shared")
    assert "can differ from one-by-one decoding" in caplog.text
    with pytest.raises(ValueError, match="is not one of batch, shared, one-by-one"):
        mode.write_clues(context, query, "memorag", "en", decoding="parallel")
