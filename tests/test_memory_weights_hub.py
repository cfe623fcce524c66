"""`resolve_memory_weights`: local folders as given, hub ids through huggingface_hub's cache, then verified.

The hub is faked (`fake_snapshot_download` copies a folder saved here into a fake cache);
the offline case runs the real huggingface_hub with outgoing traffic turned off.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import huggingface_hub
import pytest
import torch
from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError

from memorag.generation.models import (
    MemoryWeightsUnavailableError,
    is_memory_weights_id,
    resolve_memory_weights,
)
from memorag.memory import MemoryConfig, MemoryModel
from memorag.memory.checkpoint import WEIGHTS, MemoryWeightsError, load_memory_weights
from tests.memory.conftest import tiny_base

ROOT = Path(__file__).resolve().parents[1]


def tiny_memory_model(seed: int = 0) -> MemoryModel:
    return MemoryModel(tiny_base("llama", seed=seed), MemoryConfig(window=16, ratios=[4]))


@pytest.fixture
def saved_weights(tmp_path) -> Path:
    model = tiny_memory_model()
    with torch.no_grad():
        model.memory_embedding.add_(1.0)  # trained-looking: differs from a fresh model's copy of EOS
    return model.save_memory_weights(tmp_path / "saved")


@pytest.fixture
def fake_hub(monkeypatch, tmp_path, saved_weights):
    """A fake `huggingface_hub.snapshot_download` serving `saved_weights` as the repository 'team/memory'."""
    calls = []

    def fake_snapshot_download(repo_id, revision=None, allow_patterns=None, **kwargs):
        calls.append({"repo_id": repo_id, "revision": revision, "allow_patterns": allow_patterns})
        if repo_id != "team/memory":
            response = httpx.Response(404, request=httpx.Request("GET", "https://hub.invalid"))
            raise RepositoryNotFoundError(f"404: {repo_id}", response=response)
        snapshot = tmp_path / "fake-cache" / repo_id.replace("/", "--") / (revision or "main")
        if not snapshot.exists():
            shutil.copytree(saved_weights, snapshot)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    return calls


def test_a_local_folder_is_returned_as_given(saved_weights):
    assert resolve_memory_weights(saved_weights) == saved_weights
    assert resolve_memory_weights(str(saved_weights)) == saved_weights
    assert not is_memory_weights_id(str(saved_weights))


def test_a_file_or_a_missing_name_is_a_clear_error(tmp_path, saved_weights):
    with pytest.raises(NotADirectoryError, match="must be a folder"):
        resolve_memory_weights(saved_weights / WEIGHTS)
    with pytest.raises(FileNotFoundError, match="neither an existing folder nor a hub id"):
        resolve_memory_weights(str(tmp_path / "no" / "such" / "folder"))
    with pytest.raises(FileNotFoundError, match="neither an existing folder nor a hub id"):
        resolve_memory_weights("just-a-name")


def test_a_hub_id_is_downloaded_verified_and_loads(fake_hub, saved_weights):
    folder = resolve_memory_weights("team/memory@v1")
    assert fake_hub == [{"repo_id": "team/memory", "revision": "v1",
                         "allow_patterns": ["memory_config.json", "memory_weights.safetensors"]}]
    assert folder != saved_weights and (folder / WEIGHTS).is_file()
    model = tiny_memory_model()
    load_memory_weights(model, folder)
    expected = tiny_memory_model()
    load_memory_weights(expected, saved_weights)
    for name, param in model.memory_parameters().items():
        torch.testing.assert_close(param, expected.memory_parameters()[name], rtol=0, atol=0)
    assert is_memory_weights_id("team/memory") and is_memory_weights_id("team/memory@v1")


def test_corrupt_downloaded_weights_are_refused(fake_hub, saved_weights):
    folder = resolve_memory_weights("team/memory")
    (folder / WEIGHTS).write_bytes((folder / WEIGHTS).read_bytes()[:-8])
    with pytest.raises(MemoryWeightsError, match="truncated or corrupt"):
        resolve_memory_weights("team/memory")


def test_a_missing_repository_is_named(fake_hub):
    with pytest.raises(MemoryWeightsUnavailableError, match="no repository 'team/other'"):
        resolve_memory_weights("team/other")


def test_an_unreachable_hub_says_how_to_get_the_weights(monkeypatch):
    def fake_offline_snapshot_download(repo_id, **kwargs):
        raise LocalEntryNotFoundError("outgoing traffic has been disabled")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_offline_snapshot_download)
    with pytest.raises(MemoryWeightsUnavailableError, match="hub cannot be reached") as error:
        resolve_memory_weights("team/memory")
    assert "hf download team/memory --local-dir" in str(error.value)


@pytest.mark.slow
def test_offline_with_the_real_huggingface_hub(tmp_path):
    code = ("from memorag.generation.models import resolve_memory_weights\n"
            "try:\n    resolve_memory_weights('team/memory')\n"
            "except Exception as error:\n    print(type(error).__name__, error)\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("MemoryWeightsUnavailableError") and "hub cannot be reached" in done.stdout


def test_training_starts_from_memory_weights_named_by_a_hub_id(monkeypatch, tmp_path):
    from memorag.config import load_config
    from memorag.training.build import build_model
    from memorag.training.config import TrainConfig

    cfg = load_config(TrainConfig, ROOT / "configs" / "debug.yaml", [])
    built = build_model(cfg.model, cfg.memory)
    with torch.no_grad():
        built.memory_embedding.fill_(0.25)
    folder = built.save_memory_weights(tmp_path / "debug-weights")

    def fake_snapshot_download(repo_id, revision=None, allow_patterns=None, **kwargs):
        assert repo_id == "team/debug-memory"
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    cfg = load_config(TrainConfig, ROOT / "configs" / "debug.yaml", ["model.memory_weights=team/debug-memory"])
    loaded = build_model(cfg.model, cfg.memory)
    assert torch.all(loaded.memory_embedding == 0.25)


def test_downloaded_weights_of_another_format_version_are_refused(fake_hub):
    import json

    from memorag.memory.checkpoint import CONFIG

    folder = resolve_memory_weights("team/memory")
    manifest = json.loads((folder / CONFIG).read_text())
    manifest["format_version"] = 999
    (folder / CONFIG).write_text(json.dumps(manifest))
    with pytest.raises(MemoryWeightsError, match="format version|999"):
        resolve_memory_weights("team/memory")
