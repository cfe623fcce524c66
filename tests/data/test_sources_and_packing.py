"""Files read lazily and resumably; packed batches that are deterministic and resume exactly."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memorag.training.config import DataSection
from memorag.training.data import (
    PackedBatches,
    PackingSpec,
    collate_sequences,
    expand_files,
    rank_slice,
    read_blocks,
)
from memorag.training.data.document_files import Block


def fake_tokenize(text: str) -> list[int]:
    """One token per character (a stand-in for a real tokenizer)."""
    return [3 + ord(char) % 200 for char in text]


def write_texts(folder, count=3, lines=120):
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        body = "".join(f"file {number} line {i}: the quick brown fox, \u00e9t\u00e9 \u2014 ok\n" for i in range(lines))
        (folder / f"part-{number}.txt").write_text(body, encoding="utf-8")
    return sorted(folder.glob("*.txt"))


def test_text_blocks_end_at_line_breaks_and_resume_from_their_offsets(tmp_path):
    (path,) = write_texts(tmp_path, count=1)
    text = path.read_text(encoding="utf-8")
    blocks = list(read_blocks(path, read_chars=1024))
    assert len(blocks) > 3
    assert "".join(b.text for b in blocks) == text
    assert all(b.text.endswith("\n") for b in blocks)
    assert blocks[0].starts_document and not any(b.starts_document for b in blocks[1:])
    assert blocks[-1].ends_document and not any(b.ends_document for b in blocks[:-1])
    rest = list(read_blocks(path, offset=blocks[1].next_offset, read_chars=1024))
    assert [b.text for b in rest] == [b.text for b in blocks[2:]]


def test_a_long_line_without_spaces_is_cut_between_characters(tmp_path):
    path = tmp_path / "dense.txt"
    text = "\u00e9\u4e2d" * 3000
    path.write_text(text, encoding="utf-8")
    blocks = list(read_blocks(path, read_chars=1025))
    assert "".join(b.text for b in blocks) == text
    assert "\ufffd" not in "".join(b.text for b in blocks)


def test_jsonl_documents_and_offsets(tmp_path):
    path = tmp_path / "docs.jsonl"
    rows = [{"text": f"document {i}"} for i in range(5)] + [{"text": ""}, {"body": "ignored", "text": "last"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    blocks = list(read_blocks(path))
    assert [b.text for b in blocks] == [f"document {i}" for i in range(5)] + ["last"]
    assert all(b.starts_document and b.ends_document for b in blocks)
    assert [b.text for b in read_blocks(path, offset=blocks[2].next_offset)] == ["document 3", "document 4", "last"]
    path.write_text('{"content": "x"}\n')
    with pytest.raises(ValueError, match="no string field 'text'"):
        list(read_blocks(path))


def test_parquet_rows(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(10)]}), path, row_group_size=3)
    blocks = list(read_blocks(path))
    assert [b.text for b in blocks] == [f"row {i}" for i in range(10)]
    assert [b.text for b in read_blocks(path, offset=blocks[4].next_offset)] == [f"row {i}" for i in range(5, 10)]


def test_expand_files_folders_globs_and_errors(tmp_path):
    files = write_texts(tmp_path / "corpus")
    (tmp_path / "corpus" / "notes.md").write_text("skipped")
    assert expand_files([tmp_path / "corpus"]) == files
    assert expand_files([str(tmp_path / "corpus" / "part-*.txt")]) == files
    with pytest.raises(FileNotFoundError):
        expand_files([tmp_path / "missing.txt"])
    with pytest.raises(ValueError, match="unsupported"):
        expand_files([tmp_path / "corpus" / "notes.md"])


def spec(**overrides) -> PackingSpec:
    """A spec from a `data` config section, as the trainer builds it; run-level settings apart."""
    run = {"sequences_per_batch": 2, "seed": 7, "max_epochs": None}
    run.update({name: overrides.pop(name) for name in list(overrides) if name in run})
    data = DataSection(**{"min_length": 64, "max_length": 128, "length_multiple": 16, "read_chars": 1024, **overrides})
    return data.packing_spec(**run)


def test_a_spec_takes_every_data_knob_from_the_data_section():
    defaults = DataSection()
    data = DataSection(min_length=96, max_length=160, length_multiple=32, shuffle_files=False, add_bos=False,
                       add_eos=False, text_field="body", read_chars=2048)
    run = {"sequences_per_batch": 3, "seed": 5, "max_epochs": 2}
    built = data.packing_spec(**run)
    for knob in dataclasses.fields(PackingSpec):
        if knob.name in run:
            assert getattr(built, knob.name) == run[knob.name]
        else:  # declared in DataSection, and set there to a value other than its default
            assert getattr(built, knob.name) == getattr(data, knob.name) != getattr(defaults, knob.name), knob.name


def take(stream, count):
    return [next(stream) for _ in range(count)]


def test_packing_is_deterministic_and_seeded(tmp_path):
    files = write_texts(tmp_path)
    a = take(PackedBatches(files, fake_tokenize, spec(), bos_id=1, eos_id=2), 20)
    b = take(PackedBatches(files, fake_tokenize, spec(), bos_id=1, eos_id=2), 20)
    c = take(PackedBatches(files, fake_tokenize, spec(seed=8), bos_id=1, eos_id=2), 20)
    assert a == b and a != c
    for batch in a:
        assert len(batch) == 2 and len(batch[0]) == len(batch[1])
        assert 64 <= len(batch[0]) <= 128 and len(batch[0]) % 16 == 0
    assert len({len(batch[0]) for batch in a}) > 1  # lengths vary across micro-batches


def test_packing_keeps_every_token_in_order(tmp_path):
    files = write_texts(tmp_path, count=1)
    stream = PackedBatches(files, fake_tokenize, spec(sequences_per_batch=1, shuffle_files=False, max_epochs=1),
                           bos_id=1, eos_id=2)
    packed = [token for batch in stream for token in batch[0]]
    whole = [1, *fake_tokenize(files[0].read_text(encoding="utf-8")), 2]
    assert packed == whole[: len(packed)] and len(whole) - len(packed) < 128


def test_a_restored_stream_continues_exactly(tmp_path):
    files = write_texts(tmp_path, lines=40)
    original = PackedBatches(files, fake_tokenize, spec(), bos_id=1, eos_id=2)
    take(original, 13)
    state = json.loads(json.dumps(original.state_dict()))
    expected = take(original, 30)  # crosses files and an epoch boundary
    restored = PackedBatches(files, fake_tokenize, spec(), bos_id=1, eos_id=2)
    restored.load_state_dict(state)
    assert take(restored, 30) == expected
    assert restored.epoch >= 1


def test_epochs_reshuffle_files_and_the_last_one_ends_the_stream(tmp_path):
    files = write_texts(tmp_path, count=4, lines=20)
    stream = PackedBatches(files, fake_tokenize, spec(max_epochs=2), bos_id=1, eos_id=2)
    assert stream.file_order(0) != stream.file_order(1)
    count = sum(1 for _ in stream)
    assert stream.epoch == 1
    assert PackedBatches(files, fake_tokenize, spec(max_epochs=2), bos_id=1, eos_id=2).count_batches() == count


def test_a_state_for_other_files_is_refused(tmp_path):
    files = write_texts(tmp_path)
    stream = PackedBatches(files, fake_tokenize, spec(), bos_id=1, eos_id=2)
    state = stream.state_dict()
    other = PackedBatches(files[:2], fake_tokenize, spec(), bos_id=1, eos_id=2)
    with pytest.raises(ValueError, match="same data.files"):
        other.load_state_dict(state)


def test_each_process_takes_its_share_and_collates():
    batch = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12]]
    assert rank_slice(batch, 1, 2) == [[7, 8, 9], [10, 11, 12]]
    ids, labels = collate_sequences(rank_slice(batch, 0, 2))
    assert ids.tolist() == [[1, 2, 3], [4, 5, 6]] and labels.tolist() == ids.tolist()
    with pytest.raises(ValueError):
        collate_sequences([[1, 2], [3]])
    with pytest.raises(ValueError):
        rank_slice(batch, 2, 2)


def test_block_is_a_plain_value():
    assert Block("x", True, False, 1) == Block("x", True, False, 1)
