"""No crash loses a save: a writer killed (SIGKILL) at every step of swapping its save into
place leaves the last complete save, old or new, to the next reader and the next writer, with
the one-step swap (`renameat2` exchange) and with the two-rename swap of other systems.

The kills are injected at named steps (tests/reliability/swap_killer.py), not timed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memorag.storage import io
from memorag.storage.locking import recover_save, save_lock, stale_temporaries
from tests.reliability.conftest import ROOT, text_of
from tests.reliability.swap_killer import STEPS

KILLER = ROOT / "tests" / "reliability" / "swap_killer.py"
NEW_IN_PLACE = {"exchange": ("after-move-1", "mid-removal"), "renames": ("after-move-2", "mid-removal")}
CASES = [(swap, step) for swap, steps in STEPS.items() for step in steps]


def killed_writer(swap: str, step: str, target: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    environment.pop("MEMORAG_DEBUG", None)
    done = subprocess.run([sys.executable, str(KILLER), swap, step, str(target), *map(str, args)], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-2000:])
    return done


def fake_documents(save: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(save.iterdir())}


def test_the_exchange_swap_works_on_this_file_system(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
        (folder / "name").write_text(folder.name)
    assert io.rename_exchange(first, second)
    assert (first / "name").read_text() == "second" and (second / "name").read_text() == "first"


@pytest.mark.parametrize(("swap", "step"), CASES)
def test_a_writer_killed_at_any_step_of_the_swap_leaves_a_complete_save(swap, step, tmp_path):
    target = tmp_path / "save"
    with save_lock(target):
        with io.atomic_directory(target) as staging:
            for name in ("a.txt", "b.txt", "c.txt"):
                (staging / name).write_text(f"the text of {name}\n" * 50)
    old = fake_documents(target)
    killed_writer(swap, step, target, "fake", "d.txt")
    recover_save(target, wait=5)  # what every reader does first
    now = fake_documents(target)
    new = {**old, "d.txt": "the text of d.txt\n" * 50}
    # the new save once it was in place before the kill; else the old one, whole
    assert now == (new if step in NEW_IN_PLACE[swap] else old), sorted(now)
    with save_lock(target), io.atomic_directory(target) as staging:  # the next writer adds one
        for name, text in [*fake_documents(target).items(), ("e.txt", "the text of e.txt\n")]:
            (staging / name).write_text(text)
    assert set(old) | {"e.txt"} <= set(fake_documents(target))
    assert stale_temporaries(target) == [] and sorted(p.name for p in tmp_path.iterdir()) == [".save.lock", "save"]


def test_the_old_save_of_an_interrupted_swap_is_never_removed_as_a_leftover(tmp_path):
    target = tmp_path / "save"
    aside = tmp_path / ".save.ab12cd34.old" / io.PREVIOUS
    aside.mkdir(parents=True)
    (aside / "a.txt").write_text("the only copy")
    (tmp_path / ".save.zz99yy88.tmp").mkdir()  # the dead writer's unfinished new save
    assert stale_temporaries(target) == [tmp_path / ".save.zz99yy88.tmp"]
    assert io.interrupted_targets(tmp_path) == [target]
    told = []
    with save_lock(target, notify=told.append):
        assert (target / "a.txt").read_text() == "the only copy"
    assert any("restored" in line and ".save.ab12cd34.old" in line for line in told), told
    assert sorted(p.name for p in tmp_path.iterdir()) == [".save.lock", "save"]  # then the leftovers went


@pytest.fixture(scope="module")
def three_documents_saved(tiny_lm, tmp_path_factory) -> tuple[Path, list[str], Path]:
    """A save of three documents made by `memorag memorize` with the tiny model, the options, and a
    fourth and fifth document to add."""
    from memorag.commands.main import main

    folder = tmp_path_factory.mktemp("saved")
    args = ["--memory-model", str(tiny_lm), "--retriever", "bm25", "--set", "memory.window=32"]
    for number in range(5):
        (folder / f"doc{number}.txt").write_text(text_of(150, seed=40 + number))
    save = folder / "book"
    for number in range(3):
        assert main(["memorize", str(folder / f"doc{number}.txt"), "--out", str(save), *args]) == 0
    return save, args, folder


def saved_documents(save: Path) -> list[str]:
    return [row["id"] for row in json.loads((save / "manifest.json").read_text())["documents"]]


@pytest.mark.slow
@pytest.mark.parametrize(("swap", "step"), CASES)
def test_a_memorize_killed_at_any_step_of_the_swap_loses_no_document(swap, step, three_documents_saved, cli,
                                                                    tmp_path):
    import shutil

    from memorag.serve.store import CorpusStore

    original, args, documents = three_documents_saved
    save = tmp_path / "corpora" / "book"
    shutil.copytree(original, save)
    old = ["doc0.txt", "doc1.txt", "doc2.txt"]
    killed_writer(swap, step, save, "cli", "memorize", documents / "doc3.txt", "--out", save, *args)
    expected = [*old, "doc3.txt"] if step in NEW_IN_PLACE[swap] else old
    store = CorpusStore(save.parent)  # the server's view: the corpus listed, its manifest verified
    assert store.names() == ["book"] and store.describe("book")["documents"] == expected
    asked = cli("ask", save, "where is the king", *args, "--mode", "rag", "--max-new-tokens", "4")
    assert asked.returncode == 0, asked
    added = cli("memorize", documents / "doc4.txt", "--out", save, *args)
    assert added.returncode == 0 and "Traceback" not in added.stderr, added
    assert saved_documents(save) == [*expected, "doc4.txt"]
    assert sorted(path.name for path in save.parent.iterdir()) == [".book.lock", "book"]
