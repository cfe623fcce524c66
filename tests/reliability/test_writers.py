"""Writers that cannot collide: one writer at a time per save (a second waits, or fails naming
the holder), nothing the save does not own is deleted, a writer killed with -9 leaves the old
save intact, and the next writer removes what the dead one left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.conftest import ROOT, backticked, run_subprocess, text_of

# Runs the command line with one step replaced by one that kills its own process (kill -9) once
# the step's real work is done (Memory.save) or under way (MemoryModel.feed).
DYING = """
import os, signal, sys
target, step = sys.argv[1], sys.argv[2]
if target == "save":
    from memorag.memory.state import Memory as owner
else:
    from memorag.memory.model import MemoryModel as owner
original = getattr(owner, step)
def dying(*args, **kwargs):
    original(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
setattr(owner, step, dying)
from memorag.commands.main import main
sys.exit(main(sys.argv[3:]))
"""

HOLD = """
import sys, time
from memorag.storage.locking import save_lock
with save_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def documents_in(save: Path) -> list[str]:
    return [row["id"] for row in json.loads((save / "manifest.json").read_text())["documents"]]


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.endswith((".tmp", ".old")))


def python(script: str, *args, **kwargs) -> subprocess.Popen:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    environment.pop("MEMORAG_DEBUG", None)
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], cwd=ROOT, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.slow
def test_two_writers_at_once_both_documents_end_in_the_save(tiny_args, tmp_path):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text(text_of(400, seed=10))
    second.write_text(text_of(400, seed=11))
    out = tmp_path / "save"
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    environment.pop("MEMORAG_DEBUG", None)
    writers = [subprocess.Popen([sys.executable, "-m", "memorag.commands.main", "memorize", str(path), "--out", str(out),
                                 *tiny_args], cwd=ROOT, env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for path in (first, second)]
    results = [(writer.wait(timeout=600), *writer.communicate()) for writer in writers]
    succeeded = [code == 0 for code, _, _ in results]
    if all(succeeded):
        assert sorted(documents_in(out)) == ["first.txt", "second.txt"], results
    else:  # one of them may fail, but loudly, and the other's document is saved
        assert sum(succeeded) == 1, results
        failed = next(err for code, _, err in results if code != 0)
        assert "memorag: error:" in failed and "Traceback" not in failed
        assert len(documents_in(out)) == 1
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_a_second_writer_names_the_holder_and_waits_a_bounded_time(cli, tiny_args, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(300, seed=12))
    out = tmp_path / "save"
    holder = python(HOLD, out, 20)
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = cli("memorize", book, "--out", out, *tiny_args, "--wait", "1")
        assert refused.returncode == 1 and f"is being written by process {holder.pid}" in refused.stderr, refused
        # bounded: it gave up while the holder still held the lock, not when the holder let go (no wall-clock
        # limit, which a loaded host's interpreter start could break)
        assert holder.poll() is None and not out.exists()
        assert "--wait SECONDS" in refused.stderr
        # the suggested fix: wait longer; the holder lets go after its 20 s, then this writer proceeds
        waited = cli("memorize", book, "--out", out, *tiny_args, "--wait", "300")
        assert waited.returncode == 0 and f"waiting for process {holder.pid}" in waited.stderr, waited
        assert holder.poll() is not None  # it got the lock only once the holder was done
    finally:
        holder.kill()
        holder.wait()
    assert documents_in(out) == ["book.txt"]


@pytest.mark.slow
def test_kill_9_during_a_save_keeps_the_old_save_and_the_next_writer_cleans_up(cli, tiny_args, tmp_path):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text(text_of(300, seed=13))
    second.write_text(text_of(300, seed=14))
    out = tmp_path / "save"
    assert cli("memorize", first, "--out", out, *tiny_args).returncode == 0
    before = (out / "manifest.json").read_bytes()
    dying = python(DYING, "save", "save", "memorize", second, "--out", out, *tiny_args)
    dying.communicate(timeout=600)
    assert dying.returncode == -signal.SIGKILL
    assert (out / "manifest.json").read_bytes() == before and documents_in(out) == ["first.txt"]
    stale = leftovers(tmp_path)
    assert len(stale) == 1 and stale[0].startswith(".save.")  # the dead writer's staging folder
    asked = cli("ask", out, "where is the king", *tiny_args, "--mode", "rag", "--max-new-tokens", "4")
    assert asked.returncode == 0, asked  # the old save still loads
    again = cli("memorize", second, "--out", out, *tiny_args)
    assert again.returncode == 0 and f"removed {stale[0]}" in again.stderr, again
    assert documents_in(out) == ["first.txt", "second.txt"] and leftovers(tmp_path) == []


@pytest.mark.slow
def test_kill_9_during_memorize_leaves_the_old_save_as_it_was(cli, tiny_args, tmp_path):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text(text_of(300, seed=15))
    second.write_text(text_of(600, seed=16))
    out = tmp_path / "save"
    assert cli("memorize", first, "--out", out, *tiny_args).returncode == 0
    files = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    dying = python(DYING, "model", "step", "memorize", second, "--out", out, *tiny_args)
    dying.communicate(timeout=600)
    assert dying.returncode == -signal.SIGKILL
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == files
    assert leftovers(tmp_path) == []


def test_stale_temporaries_of_this_save_only_are_removed_by_the_next_writer(cli, tiny_args, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(200, seed=17))
    out = tmp_path / "save"
    stale = [tmp_path / ".save.ab12cd_3.tmp", tmp_path / ".save.zz99yy88.old"]
    kept = [tmp_path / ".save.mine.tmp", tmp_path / ".saved.ab12cd34.tmp", tmp_path / ".other.ab12cd34.tmp"]
    for folder in stale + kept:
        folder.mkdir()
        (folder / "data.bin").write_bytes(b"x" * 1000)
    result = cli("memorize", book, "--out", out, *tiny_args)
    assert result.returncode == 0, result
    assert not any(folder.exists() for folder in stale) and all(folder.exists() for folder in kept)
    assert "removed .save.ab12cd_3.tmp" in result.stderr


def test_a_foreign_file_in_a_save_is_never_deleted_and_the_suggested_move_works(cli, tiny_args, tmp_path):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text(text_of(300, seed=18))
    second.write_text(text_of(300, seed=19))
    out = tmp_path / "save"
    assert cli("memorize", first, "--out", out, *tiny_args).returncode == 0
    for foreign in (out / "notes.txt", out / "memory" / "mine.bin"):
        foreign.write_text("the user's own file")
        for extra in ([], ["--overwrite"]):
            refused = cli("memorize", second, "--out", out, *tiny_args, *extra)
            assert refused.returncode == 2 and str(foreign) in refused.stderr, refused
            assert foreign.read_text() == "the user's own file" and documents_in(out) == ["first.txt"]
        move = backticked(refused.stderr)[0]
        assert move[0] == "mv"
        subprocess.run(move, check=True)
        assert (tmp_path / foreign.name).read_text() == "the user's own file"
    assert cli("memorize", second, "--out", out, *tiny_args).returncode == 0
    assert documents_in(out) == ["first.txt", "second.txt"]


def test_the_python_api_refuses_a_foreign_file_too(tmp_path):
    import pytest

    from memorag.pipeline import SaveDirectoryError
    from tests.pipeline.conftest import corpus_documents, make_rag

    rag = make_rag()
    rag.memorize(corpus_documents()[:1])
    rag.save(tmp_path / "save")
    (tmp_path / "save" / "index" / "extra").mkdir()
    rag.memorize(corpus_documents()[1:2])
    with pytest.raises(SaveDirectoryError, match="index/extra"):
        rag.save(tmp_path / "save")
    assert (tmp_path / "save" / "index" / "extra").is_dir()


def test_memorize_help_documents_the_wait():
    result = run_subprocess("memorize", "--help")
    assert result.returncode == 0 and "--wait S" in result.stdout and "another writer" in result.stdout
