"""One run per output folder, the user's mistakes as one `error:` line (exit 2) before the model loads,
and final weights written like checkpoints."""

from __future__ import annotations

import fcntl
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from memorag.storage.locking import lock_path
from memorag.training import trainer as trainer_module
from memorag.training.cli import train_main
from memorag.training.trainer import Trainer
from tests.training.conftest import STOPPED_RUN
from tests.training.helpers import DEBUG_CONFIG, QUICK, ROOT, quick_config


def _argv(output_dir, *overrides):
    return ["--config", str(DEBUG_CONFIG), f"checkpoint.output_dir={output_dir}", "logging.progress_bar=false",
            "eval.at_end=false", f"data.files=[{ROOT / 'examples' / 'kjv_ruth_esther_jonah.txt'}]", *QUICK, *overrides]


def _refused(capsys, argv) -> str:
    """Run train/pretrain.py's entry point in this process; the one error line it printed (exit 2)."""
    assert train_main("pretrain", argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.fixture
def no_model(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("the model was built before the mistake was found")

    monkeypatch.setattr(trainer_module, "build_model", refuse)


@pytest.mark.slow
def test_a_second_process_on_a_folder_is_refused_and_a_killed_runs_lock_is_taken_over(tmp_path, capsys):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    log = open(tmp_path / "first.log", "w")  # noqa: SIM115 - closed in the finally below
    first = subprocess.Popen([sys.executable, "train/pretrain.py", *_argv(run, "optim.max_steps=100000",
                                                                          "checkpoint.every_steps=1")],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 600  # a guard against a hang: about 20 s on 2 cores
        # any checkpoint: with one a step and five kept, checkpoint-1 lives a fraction of a second
        while not any(path.is_dir() for path in run.glob("checkpoint-*")):
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, ("the first run made no checkpoint in 600 s; its log ends:\n"
                                                 + (tmp_path / "first.log").read_text()[-3000:])
            time.sleep(0.2)
        message = _refused(capsys, _argv(run, "optim.max_steps=100000", "checkpoint.every_steps=1"))
        assert f"checkpoint.output_dir={run} is in use by process {first.pid} on " in message
        assert "since 20" in message and "one run per folder" in message and f"touch {run / 'STOP'}" in message
        assert first.poll() is None  # the first run goes on, untouched
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
        log.close()
    # the killed run's lock is stale: the next run takes it, cleans up after it and goes on
    done = max(int(path.name.split("-")[1]) for path in run.glob("checkpoint-*"))
    summary = Trainer(quick_config(run, "optim.max_steps=100000", "checkpoint.every_steps=1",
                                   f"optim.stop_at_step={done + 1}")).train()
    assert summary["step"] == done + 1 and summary["reason"].startswith("stopped")
    assert not list(run.glob(".checkpoint-*.partial"))


def _read_only_folder(tmp_path):
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    if os.path.isdir("/proc/self"):  # root writes through permission bits; not into /proc
        return "/proc/self"
    pytest.skip("no folder this user cannot write to")


def _touched(path):
    path.touch()
    return path


# mistake: (overrides, the setting the error names, what it says)
MISTAKES = {
    "missing data": (lambda tmp: [f"data.files=[{tmp / 'absent.txt'}]"], "data.files", "does not exist"),
    "empty data": (lambda tmp: [f"data.files=[{_touched(tmp / 'empty.txt')}]"], "data.files", "hold no data"),
    "missing eval data": (lambda tmp: [f"eval.files=[{tmp / 'held-out'}]"], "eval.files", "does not exist"),
    "output dir is a file": (lambda tmp: [f"checkpoint.output_dir={_touched(tmp / 'f')}"],
                             "checkpoint.output_dir", "is a file, not a folder"),
    "output dir below a file": (lambda tmp: [f"checkpoint.output_dir={_touched(tmp / 'f') / 'run'}"],
                                "checkpoint.output_dir", "a part of the path is a file"),
    "unwritable output dir": (lambda tmp: [f"checkpoint.output_dir={_read_only_folder(tmp)}"],
                              "checkpoint.output_dir", "is not writable"),
    "unreachable length": (lambda tmp: ["data.max_length=100000"], "data.max_length=100000",
                           "beyond the model's reach"),
    "missing memory weights": (lambda tmp: [f"model.memory_weights={tmp}"], "model.memory_weights",
                               "holds no memory weights"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_user_mistake_is_one_error_line_and_exit_2_before_the_model_loads(tmp_path, capsys, no_model, mistake):
    overrides, setting, says = MISTAKES[mistake]
    message = _refused(capsys, _argv(tmp_path / "run", "optim.max_steps=2", *overrides(tmp_path)))
    assert setting in message and says in message, message


def test_corrupt_memory_weights_are_named_before_the_model_loads(stopped_run, tmp_path, capsys, no_model):
    weights = stopped_run / "checkpoint-2" / "memory_weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    message = _refused(capsys, _argv(tmp_path / "sft-like", f"model.memory_weights={stopped_run / 'checkpoint-2'}"))
    assert f"model.memory_weights={stopped_run / 'checkpoint-2'}" in message and "corrupt" in message


def test_resume_mistakes_are_one_error_line_too(stopped_run, capsys, no_model):
    changed = _refused(capsys, _argv(stopped_run, *STOPPED_RUN[:2], "optim.lr=0.01"))
    assert "optim.lr 0.003 -> 0.01" in changed
    optimizer = stopped_run / "checkpoint-3" / "optimizer.pt"
    optimizer.write_bytes(optimizer.read_bytes()[:64])
    damaged = _refused(capsys, _argv(stopped_run, *STOPPED_RUN[:2], "checkpoint.if_damaged=refuse"))
    assert str(optimizer) in damaged and damaged.endswith(f"checkpoint.resume={stopped_run / 'checkpoint-2'}")


def test_internal_errors_keep_their_traceback(tmp_path, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug, not a mistake of the user")

    monkeypatch.setattr(trainer_module, "build_model", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        train_main("pretrain", _argv(tmp_path / "run", "optim.max_steps=1"))
    with open(lock_path(tmp_path / "run"), "a") as handle:  # the failed run let go of its folder
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_final_weights_have_the_permissions_of_checkpoint_files(tmp_path):
    run = tmp_path / "run"
    mask = os.umask(0)
    os.umask(mask)
    Trainer(quick_config(run, "optim.max_steps=1")).train()
    for name in ("memory_weights.safetensors", "memory_config.json", "train_config.yaml"):
        final = stat.S_IMODE((run / "final" / name).stat().st_mode)
        assert final == stat.S_IMODE((run / "checkpoint-1" / name).stat().st_mode), name
        assert final == 0o666 & ~mask, oct(final)  # what the umask allows, as for any file the run writes
    assert stat.S_IMODE((run / "final").stat().st_mode) == stat.S_IMODE((run / "checkpoint-1").stat().st_mode)
