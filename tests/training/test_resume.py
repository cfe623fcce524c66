"""Resuming with changed settings (refused, applied and logged, or applied by the override and recorded),
and resuming over damaged checkpoints (each file named; fallback to the newest intact one, or refusal)."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch
import yaml
from safetensors.torch import load_file

from memorag.training import resume
from memorag.training import run_checkpoints as ckpt
from memorag.training import trainer as trainer_module
from memorag.training.errors import TrainingInputError
from memorag.training.schedules import lr_factor
from memorag.training.trainer import Trainer
from tests.training.conftest import STOPPED_RUN
from tests.training.helpers import quick_config, train_losses


@pytest.fixture
def no_model(monkeypatch):
    """Fails the test if the model is built: what is refused must be refused before it loads."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(trainer_module, "build_model", refuse)


def _records(folder, event):
    return [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()
            if json.loads(line)["event"] == event]


# -- settings --------------------------------------------------------------------------------------

@pytest.mark.parametrize("changed, named", [
    (["seed=7", "optim.lr=1e-2", "optim.max_steps=12"], ["optim.lr 0.003 -> 0.01", "seed 42 -> 7"]),  # the issue's
    (["optim.max_steps=5"], ["optim.max_steps 6 -> 5"]),  # shortening reshapes the schedule
    (["optim.schedule=linear", "optim.betas=[0.8,0.99]"], ["optim.betas [0.9, 0.999] -> [0.8, 0.99]",
                                                           'optim.schedule "cosine" -> "linear"']),
    (["data.batch_size=2"], ["data.batch_size 1 -> 2"]),
    (["memory.ratios=[4]", "eval.num_sequences=1"], ["memory.ratios [2, 4, 8] -> [4]", "eval.num_sequences 2 -> 1"]),
    (["loss.kind=mix", "precision=auto"], ['loss.kind "lm" -> "mix"', 'precision "fp32" -> "auto"']),
])
def test_settings_that_shape_the_run_are_refused_before_the_model_loads(stopped_run, no_model, changed, named):
    config_before = (stopped_run / "train_config.yaml").read_text()
    log_before = (stopped_run / "train_log.jsonl").read_text()
    with pytest.raises(TrainingInputError) as refused:
        Trainer(quick_config(stopped_run, *STOPPED_RUN[:2], *changed))
    message = str(refused.value)
    assert f"resuming {stopped_run / 'checkpoint-3'} with settings it was not trained with" in message
    for item in named:
        assert item in message, message
    assert "optim.max_steps 6 -> 12" not in message  # a longer run may go on: not among the refused
    assert "another checkpoint.output_dir" in message and "checkpoint.resume_with_changes=true" in message
    # the record still describes the run that happened
    assert (stopped_run / "train_config.yaml").read_text() == config_before
    assert (stopped_run / "train_log.jsonl").read_text() == log_before


@pytest.mark.parametrize("changed", [["model.init_seed=1"], ["model.memory_rank=4"], ["model.dtype=bfloat16"]])
def test_what_the_weights_are_cannot_change_even_with_the_override(stopped_run, no_model, changed):
    with pytest.raises(TrainingInputError, match="was trained as another model: model[.]"):
        Trainer(quick_config(stopped_run, *STOPPED_RUN[:2], *changed, "checkpoint.resume_with_changes=true"))


def test_settings_that_may_change_are_applied_logged_and_recorded(stopped_run):
    cfg = quick_config(stopped_run, "optim.max_steps=8", "checkpoint.every_steps=5", "logging.every_steps=2")
    summary = Trainer(cfg).train()
    assert summary["step"] == 8 and summary["reason"] == "finished"
    [event] = _records(stopped_run, "resume")
    changes = {c["key"]: (c["from"], c["to"], c["kind"]) for c in event["changes"]}
    assert changes["optim.max_steps"] == (6, 8, "adjustable")
    assert changes["optim.stop_at_step"] == (3, None, "adjustable")
    assert changes["logging.every_steps"] == (1, 2, "adjustable")
    assert event["step"] == 3 and event["from"] == str(stopped_run / "checkpoint-3")
    assert sorted(train_losses(stopped_run)) == [1, 2, 3, 4, 6, 8]  # every 2 steps after the resume
    # the longer run decays over its new length from the resumed step on
    lrs = {r["step"]: r["lr"] for r in _records(stopped_run, "train")}
    for step in (4, 8):
        assert lrs[step] == pytest.approx(3e-3 * lr_factor(step - 1, 8, 2, "cosine"), rel=1e-12), step
    # the top-level record is the config in force; each checkpoint keeps its own
    assert yaml.safe_load((stopped_run / "train_config.yaml").read_text())["optim"]["max_steps"] == 8
    assert yaml.safe_load((stopped_run / "checkpoint-3" / "train_config.yaml").read_text())["optim"]["max_steps"] == 6
    state = json.loads((stopped_run / "checkpoint-8" / "trainer_state.json").read_text())
    assert [r["step"] for r in state["resumes"]] == [3]


def test_the_override_applies_changed_optimizer_settings_and_records_that_it_did(stopped_run):
    cfg = quick_config(stopped_run, "seed=7", "optim.lr=1e-2", "optim.max_steps=12", "optim.betas=[0.8,0.99]",
                       "optim.stop_at_step=4", "checkpoint.resume_with_changes=true")
    trainer = Trainer(cfg)
    for group in trainer.optimizer.param_groups:  # the restored state carried the checkpoint's values
        assert group["betas"] == (0.8, 0.99)
        assert group["lr"] == pytest.approx(1e-2 * lr_factor(3, 12, 2, "cosine"), rel=1e-12)
    trainer.train()
    assert {r["step"]: r["lr"] for r in _records(stopped_run, "train")}[4] == pytest.approx(
        1e-2 * lr_factor(3, 12, 2, "cosine"), rel=1e-12)  # the issue saw the old schedule's 0.0015 here
    recorded = yaml.safe_load((stopped_run / "train_config.yaml").read_text())
    assert (recorded["optim"]["lr"], recorded["seed"]) == (0.01, 7)
    kept = yaml.safe_load((stopped_run / "checkpoint-3" / "train_config.yaml").read_text())
    assert (kept["optim"]["lr"], kept["seed"]) == (0.003, 42)
    state = json.loads((stopped_run / "checkpoint-4" / "trainer_state.json").read_text())
    [applied] = state["resumes"]
    kinds = {c["key"]: c["kind"] for c in applied["changes"]}
    assert kinds["optim.lr"] == kinds["seed"] == kinds["optim.betas"] == "guarded"
    assert kinds["checkpoint.resume_with_changes"] == "adjustable"
    assert _records(stopped_run, "resume")[0]["changes"] == applied["changes"]


def test_the_override_cannot_carry_a_data_position_into_other_files(stopped_run, tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("Other text to train on. " * 400)
    with pytest.raises(TrainingInputError, match="cannot carry over.*model.memory_weights=.*checkpoint-3"):
        Trainer(quick_config(stopped_run, *STOPPED_RUN[:2], f"data.files=[{other}]",
                             "checkpoint.resume_with_changes=true"))


# -- damaged checkpoints -------------------------------------------------------------------------------

DAMAGEABLE = ["memory_weights.safetensors", "memory_config.json", "optimizer.pt", "rng_state_0.pt",
              "data_state.json", "train_config.yaml", "trainer_state.json"]


def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize("name", DAMAGEABLE)
def test_each_damaged_file_is_named_with_the_checkpoint_to_resume_from(stopped_run, name):
    _truncate(stopped_run / "checkpoint-3" / name)
    with pytest.raises(ckpt.CheckpointError) as refused:
        resume.select_checkpoint(stopped_run, "auto", "refuse")
    message = str(refused.value)
    assert str(stopped_run / "checkpoint-3" / name) in message
    assert message.endswith(f"checkpoint.resume={stopped_run / 'checkpoint-2'}")
    assert (stopped_run / "checkpoint-3").is_dir()  # refusing moves nothing


def test_a_file_changed_in_place_is_damage_too(stopped_run):
    path = stopped_run / "checkpoint-3" / "optimizer.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped
    path.write_bytes(bytes(data))
    assert "optimizer.pt differs from what was written" in resume.damage(stopped_run / "checkpoint-3")
    assert resume.damage(stopped_run / "checkpoint-2") is None


def test_checkpoints_without_a_file_record_are_checked_by_reading_them(stopped_run):
    folder = stopped_run / "checkpoint-3"
    state = json.loads((folder / "trainer_state.json").read_text())
    del state[ckpt.FILES]
    (folder / "trainer_state.json").write_text(json.dumps(state))
    assert resume.damage(folder) is None
    _truncate(folder / "rng_state_0.pt")
    assert f"{folder / 'rng_state_0.pt'} cannot be read" in resume.damage(folder)


def test_a_damaged_newest_checkpoint_falls_back_and_retraining_reproduces_it(stopped_run, tmp_path, caplog):
    damaged = stopped_run / "checkpoint-3" / "memory_weights.safetensors"
    original = {name: tensor.clone() for name, tensor in load_file(str(damaged)).items()}  # not a view of the file
    loss_at_3 = train_losses(stopped_run)[3]
    _truncate(damaged)
    with caplog.at_level(logging.WARNING, logger="memorag.training.resume"):
        summary = Trainer(quick_config(stopped_run, *STOPPED_RUN)).train()
    assert f"{damaged} has" in caplog.text and "set aside as checkpoint-3.damaged" in caplog.text
    assert "resuming from the newest intact checkpoint" in caplog.text
    assert summary["step"] == 3
    assert (stopped_run / "checkpoint-3.damaged" / "memory_weights.safetensors").is_file()  # kept to inspect
    assert ckpt.read_latest(stopped_run).name == "checkpoint-3"
    assert train_losses(stopped_run)[3] == loss_at_3  # the step redone is the step that was lost
    redone = load_file(str(stopped_run / "checkpoint-3" / "memory_weights.safetensors"))
    for name, tensor in original.items():
        assert torch.equal(redone[name], tensor), name


def test_a_damaged_checkpoint_named_explicitly_is_refused_and_so_is_a_folder_with_none_intact(stopped_run):
    _truncate(stopped_run / "checkpoint-3" / "optimizer.pt")
    with pytest.raises(ckpt.CheckpointError, match=f"checkpoint.resume={stopped_run / 'checkpoint-2'}$"):
        resume.select_checkpoint(stopped_run, str(stopped_run / "checkpoint-3"), "fallback")
    shutil.rmtree(stopped_run / "checkpoint-2")
    with pytest.raises(ckpt.CheckpointError, match="no intact checkpoint is left"):
        resume.select_checkpoint(stopped_run, "auto", "fallback")
    assert (stopped_run / "checkpoint-3").is_dir()
