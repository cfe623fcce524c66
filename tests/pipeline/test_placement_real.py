"""Real CPU loads of the embedded models in float32 and bfloat16 through the pipeline's settings:
the memory model, a separately loaded generator and the embedder all run in the dtype asked for."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from memorag.generation import LocalGenerator
from memorag.generation.models import EMBEDDED_LM
from memorag.pipeline import MemoRAG

TEXT = ("Naomi went with her husband Elimelech and their two sons from Bethlehem to the land of Moab. "
        "After her husband and sons died, Ruth stayed with her and they returned to Bethlehem. ") * 3
SENTENCES = ["Ruth stayed with Naomi.", "They returned to Bethlehem at the beginning of the barley harvest."]


@pytest.mark.slow
def test_the_embedded_models_load_and_run_on_the_cpu_in_float32_and_bfloat16():
    vectors = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        rag = MemoRAG(device="cpu", dtype=name, clue_max_new_tokens=4, answer_max_new_tokens=4)
        model = rag.memory_model
        assert model.base_dtype == dtype and model.device.type == "cpu"
        assert {p.dtype for p in model.parameters()} == {dtype}
        memory = model.memorize(TEXT)
        assert memory.keys[0].dtype == dtype
        assert model.generate("Who stayed with Naomi?", memory=memory, max_new_tokens=4).strip()
        embedder = rag.embedder
        assert {p.dtype for p in embedder.parameters()} == {dtype} and embedder.device.type == "cpu"
        vectors[name] = embedder.encode(SENTENCES, normalize_embeddings=True)
        assert vectors[name].dtype == np.float32  # what the faiss index needs, whatever the model's dtype
    cosines = (vectors["float32"] * vectors["bfloat16"]).sum(axis=1)
    assert cosines.min() > 0.99, cosines


@pytest.mark.slow
def test_a_separately_loaded_generator_follows_device_and_dtype():
    generator = LocalGenerator.from_pretrained(EMBEDDED_LM, device="cpu", dtype="bfloat16")
    assert {p.dtype for p in generator.model.parameters()} == {torch.bfloat16}
    assert next(generator.model.parameters()).device.type == "cpu"
    assert generator.generate("Name a city.", max_new_tokens=4)
