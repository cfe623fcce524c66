"""A save cannot lie: every part is bound to the manifest. Each part swapped with the same part
of another save, and each manifest field edited, one at a time, is refused, naming the part."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memorag.pipeline import ManifestMismatchError, MemoRAG, SaveFormatError
from memorag.pipeline.persistence import seal
from memorag.retrieval import Document
from tests.pipeline.conftest import FakeHashEmbedder, corpus_documents, make_rag, tiny_model, topic

REFUSALS = (SaveFormatError, ManifestMismatchError)


@pytest.fixture(scope="module")
def two_saves(tmp_path_factory) -> tuple[Path, Path]:
    """Two saves of different texts by the same models and settings."""
    folder = tmp_path_factory.mktemp("saves")
    first = make_rag()
    first.memorize(corpus_documents())
    first.save(folder / "first")
    second = make_rag()
    second.memorize([Document(id="other", title="Other", text=topic(2, 90) + " " + topic(0, 40))])
    second.save(folder / "second")
    return folder / "first", folder / "second"


def load(path: Path) -> MemoRAG:
    return MemoRAG.load(path, memory_model=tiny_model(), embedder=FakeHashEmbedder(), embedder_name="fake-hash")


def copy(save: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(save, target)
    return target


def test_an_intact_copy_loads(two_saves, tmp_path):
    loaded = load(copy(two_saves[0], tmp_path))
    assert loaded.memory is not None and len(loaded.documents) == 3


@pytest.mark.parametrize("part", ["documents.jsonl", "chunks.jsonl", "index", "memory", "manifest.json"])
def test_each_part_swapped_with_another_saves_is_refused(two_saves, tmp_path, part):
    first, second = two_saves
    target = copy(first, tmp_path)
    if (target / part).is_dir():
        shutil.rmtree(target / part)
        shutil.copytree(second / part, target / part)
    else:
        shutil.copy2(second / part, target / part)
    with pytest.raises(REFUSALS) as refused:
        load(target)
    named = {"manifest.json": "differs from the manifest's checksum"}.get(part, part)  # another's manifest
    assert named in str(refused.value) and "memorag memorize FILE... --out" in str(refused.value)


def _leaves(value, path=()):
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from _leaves(child, (*path, key))
    elif isinstance(value, list) and value:
        for index, child in enumerate(value):
            yield from _leaves(child, (*path, index))
    else:
        yield path


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if value is None:
        return 1
    return [*value, "x"] if isinstance(value, list) else {"x": 1}


def _edit(manifest: dict, path: tuple, value) -> None:
    node = manifest
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def test_each_manifest_field_edited_is_refused_naming_its_section(two_saves, tmp_path):
    first = two_saves[0]
    original = json.loads((first / "manifest.json").read_text())
    leaves = list(_leaves(original))
    assert len(leaves) > 80  # every setting, document, file and memory field
    target = copy(first, tmp_path)
    for path in leaves:
        manifest = json.loads(json.dumps(original))
        node = manifest
        for key in path[:-1]:
            node = node[key]
        _edit(manifest, path, _changed(node[path[-1]]))
        (target / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(REFUSALS) as refused:
            load(target)
        section = path[1] if path[0] == "seal" else path[0]
        expected = {"format": "does not describe", "format_version": "format version"}.get(path[0], repr(section))
        assert expected in str(refused.value), (path, str(refused.value))


@pytest.mark.parametrize("field", ["num_tokens", "num_entries", "content_sha256", "ratio", "chat", "tensors_sha256"])
def test_the_memory_is_checked_against_its_record_even_in_a_resealed_manifest(two_saves, tmp_path, field):
    """A manifest rewritten and sealed again (a buggy writer) still cannot vouch for another memory."""
    target = copy(two_saves[0], tmp_path)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["memory"][field] = _changed(manifest["memory"][field])
    manifest["seal"] = seal(manifest)
    (target / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SaveFormatError, match=f"not the one its manifest records.*{field}"):
        load(target)


def test_another_saves_memory_with_a_resealed_file_list_is_refused(two_saves, tmp_path):
    first, second = two_saves
    target = copy(first, tmp_path)
    shutil.rmtree(target / "memory")
    shutil.copytree(second / "memory", target / "memory")
    manifest = json.loads((target / "manifest.json").read_text())
    other = json.loads((second / "manifest.json").read_text())
    for name in manifest["files"]:
        if name.startswith("memory/"):
            manifest["files"][name] = other["files"][name]
    manifest["seal"] = seal(manifest)
    (target / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SaveFormatError, match="swapped with another save's memory") as refused:
        load(target)
    assert "num_tokens" in str(refused.value) and "content_sha256" in str(refused.value)


@pytest.mark.parametrize("edit", ["memory_identity", "content_sha256", "title", "num_chars"])
def test_documents_and_identity_are_checked_even_in_a_resealed_manifest(two_saves, tmp_path, edit):
    target = copy(two_saves[0], tmp_path)
    manifest = json.loads((target / "manifest.json").read_text())
    if edit == "memory_identity":
        manifest["models"]["memory_identity"]["memory_config"]["seed"] += 1
        expected = ManifestMismatchError, "memory_config"
    elif edit == "content_sha256":
        manifest["content_sha256"] = "0" * 64
        expected = SaveFormatError, "content_sha256"
    else:
        manifest["documents"][0][edit] = _changed(manifest["documents"][0][edit])
        expected = SaveFormatError, "documents"
    manifest["seal"] = seal(manifest)
    (target / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(expected[0], match=expected[1]):
        load(target)


def test_a_truncated_memory_is_refused_naming_it(two_saves, tmp_path):
    target = copy(two_saves[0], tmp_path)
    tensors = target / "memory" / "memory.safetensors"
    tensors.write_bytes(tensors.read_bytes()[:-100])
    with pytest.raises(SaveFormatError, match="'memory/'"):
        load(target)


def test_asking_a_save_with_a_swapped_memory_writes_no_clues(two_saves, tmp_path, monkeypatch):
    """The reported failure: `ask` used another text's memory without a word."""
    first, second = two_saves
    target = copy(first, tmp_path)
    shutil.rmtree(target / "memory")
    shutil.copytree(second / "memory", target / "memory")
    with pytest.raises(SaveFormatError, match="memory"):
        load(target).ask(topic(1, 6))
