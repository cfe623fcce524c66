"""The pipeline's device, dtype, quantization and thread settings reach every model it loads, and the
clue-writing progress bar. Loaders are FAKES that record their keyword arguments; the real CPU loads
are in test_placement_real.py."""

from __future__ import annotations

import pytest
import sentence_transformers
import torch
import transformers

from memorag.memory import MemoryModel
from memorag.pipeline import ManifestMismatchError, MemoRAG
from tests.fake_gpu import fake_gpu, no_gpu  # noqa: F401 - fixtures, used by name
from tests.memory.conftest import tiny_base
from tests.memory.test_persistence import tiny_tokenizer
from tests.pipeline.conftest import (
    ASK_SETTINGS,
    FakeEchoGenerator,
    FakeHashEmbedder,
    corpus_documents,
    make_rag,
    tiny_model,
    topic,
)


@pytest.fixture
def fake_loaders(monkeypatch) -> dict[str, dict]:
    """FAKE loaders in place of the real ones: each records the keywords it was called with and
    returns a tiny in-process model."""
    calls: dict[str, dict] = {}

    def memory_model(base=None, memory_weights=None, config=None, **load_kwargs):
        calls["memory_model"] = {"base": base, **load_kwargs}
        return tiny_model()

    class FakeCausalLM:
        @staticmethod
        def from_pretrained(path, **kwargs):
            calls["generator"] = {"path": path, **kwargs}
            return tiny_base("llama")

    class FakeTokenizer:
        @staticmethod
        def from_pretrained(path, **kwargs):
            return tiny_tokenizer()

    def sentence_transformer(path, **kwargs):
        calls["embedder"] = {"path": path, **kwargs}
        return FakeHashEmbedder()

    monkeypatch.setattr(MemoryModel, "from_pretrained", memory_model)
    monkeypatch.setattr(transformers, "AutoModelForCausalLM", FakeCausalLM)
    monkeypatch.setattr(transformers, "AutoTokenizer", FakeTokenizer)
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", sentence_transformer)
    return calls


def _load_all(rag: MemoRAG) -> None:
    rag.check_models()
    rag.memory_model, rag.generator, rag.embedder  # noqa: B018 - loaded on first use


@pytest.mark.usefixtures("fake_gpu")
def test_on_a_gpu_every_model_follows_device_dtype_and_4bit(fake_loaders):
    rag = MemoRAG(memory_model="owner/memory", generator="owner/generator", embedder="owner/embedder",
                  device="cuda", dtype="bf16", quantize="4bit")
    _load_all(rag)
    memory, generator, embedder = (fake_loaders[key] for key in ("memory_model", "generator", "embedder"))
    for lm in (memory, generator):
        assert lm["device_map"] == {"": "cuda"} and lm["dtype"] == torch.bfloat16
        config = lm["quantization_config"]
        assert config.load_in_4bit and config.bnb_4bit_compute_dtype == torch.bfloat16
    assert generator["path"] == "owner/generator" and memory["base"] == "owner/memory"
    assert embedder == {"path": "owner/embedder", "device": "cuda", "model_kwargs": {"dtype": torch.bfloat16}}


@pytest.mark.usefixtures("fake_gpu")
def test_auto_on_a_gpu_and_8bit(fake_loaders):
    _load_all(MemoRAG(generator="owner/generator", embedder="owner/embedder", quantize="8bit"))
    for lm in (fake_loaders["memory_model"], fake_loaders["generator"]):
        assert lm["device_map"] == {"": "cuda"} and lm["dtype"] == "auto"
        assert lm["quantization_config"].load_in_8bit
    assert fake_loaders["embedder"]["device"] == "cuda" and "model_kwargs" not in fake_loaders["embedder"]


@pytest.mark.usefixtures("no_gpu")
def test_on_the_cpu_the_defaults_load_as_before(fake_loaders):
    _load_all(MemoRAG(generator="owner/generator", embedder="owner/embedder"))
    assert fake_loaders["memory_model"] == {"base": None, "dtype": "auto"}
    assert fake_loaders["generator"] == {"path": "owner/generator", "dtype": "auto"}
    assert fake_loaders["embedder"] == {"path": "owner/embedder", "device": "cpu"}
    _load_all(MemoRAG(generator="owner/generator", embedder="owner/embedder", dtype="float32"))
    assert fake_loaders["memory_model"]["dtype"] == fake_loaders["generator"]["dtype"] == torch.float32


@pytest.mark.usefixtures("no_gpu")
def test_4bit_without_a_gpu_fails_before_any_model_loads(fake_loaders):
    rag = MemoRAG(generator="owner/generator", embedder="owner/embedder", quantize="4bit")
    with pytest.raises(ValueError, match="--load-in-4bit needs a CUDA GPU and bitsandbytes: pip install"):
        rag.check_models()
    with pytest.raises(ValueError, match="--load-in-4bit needs a CUDA GPU"):
        rag.memory_model  # noqa: B018
    assert fake_loaders == {}


def test_the_threads_setting_sets_torchs_threads():
    torch.set_num_threads(3)  # the pipeline conftest restores the count after the test
    make_rag()
    assert torch.get_num_threads() == 3  # unset: left alone
    make_rag(threads=2)
    assert torch.get_num_threads() == 2


def test_clue_writing_shows_a_bar_kind_by_kind(capsys):
    rag = make_rag()
    rag.memorize(corpus_documents())
    capsys.readouterr()
    query = topic(1, 6)
    quiet = rag.ask(query)
    assert "writing clues" not in capsys.readouterr().err  # off unless asked for
    shown = rag.ask(query, show_progress=True)
    err = capsys.readouterr().err
    assert "writing clues 3/3" in err and all(kind in err for kind in ("spans", "questions", "draft"))
    assert shown.clues == quiet.clues
    rag.clues(query, show_progress=True)
    assert "writing clues 3/3" in capsys.readouterr().err
    rag.clues(query, task="summarize", show_progress=True)
    assert "writing clues 1/1" in capsys.readouterr().err  # key points: one request


def test_a_memory_made_in_another_dtype_is_refused_clearly(tmp_path):
    model = tiny_model().to(torch.bfloat16)
    rag = make_rag(model=model)
    rag.memorize(corpus_documents())
    rag.save(tmp_path / "saved")
    kwargs = {"embedder": FakeHashEmbedder(), "embedder_name": "fake-hash", "generator": FakeEchoGenerator(),
              **ASK_SETTINGS}
    in_float32 = tiny_model().to(torch.bfloat16).to(torch.float32)  # the same weights, exactly
    with pytest.raises(ManifestMismatchError, match="memorized in bfloat16 and the memory model now runs in "
                                                    "float32; ask it with --dtype bfloat16"):
        MemoRAG.load(tmp_path / "saved", memory_model=in_float32, **kwargs)
    loaded = MemoRAG.load(tmp_path / "saved", memory_model=model, **kwargs)
    assert loaded.ask(topic(1, 6)).clues == rag.ask(topic(1, 6)).clues
