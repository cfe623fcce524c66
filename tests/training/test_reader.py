"""The reader recipe (train/reader.py): a LoRA adapter on a tiny random Llama over the debug samples.

What it trains on is what the pipeline sends (the generator's own measurement of the prompt, the
reply after it); a run stopped and resumed ends with the adapter of an uninterrupted run, bit for
bit; settings it does not read, and unknown ones, are refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from memorag.config import ConfigError, load_config
from memorag.training import run_checkpoints as ckpt
from memorag.training.cli import train_main
from memorag.training.config import TrainConfig
from memorag.training.data.reader_samples import ReaderSample, render_reader_sample
from memorag.training.data.sft import IGNORE_INDEX
from tests.training.helpers import ROOT, reset_accelerate, resumed_equals_straight, train_losses

DEBUG_READER = ROOT / "configs" / "debug-reader.yaml"
SAMPLES = ROOT / "examples" / "reader_debug.jsonl"


def reader_config(output_dir: Path, *overrides: str) -> TrainConfig:
    return load_config(TrainConfig, DEBUG_READER, [
        f"checkpoint.output_dir={output_dir}", "logging.progress_bar=false", f"data.files=[{SAMPLES}]",
        *overrides])


def run(cfg: TrainConfig) -> dict:
    from memorag.training.reader_trainer import ReaderTrainer

    reset_accelerate()
    return ReaderTrainer(cfg).train()


def test_a_sample_is_the_prompt_the_generator_measures_then_the_reply_and_its_stop():
    from memorag.generation.local import LocalGenerator
    from memorag.training.reader_trainer import load_base

    cfg = reader_config(Path("unused"))
    base, tokenizer = load_base(cfg.model, torch.float32)
    generator = LocalGenerator(base, tokenizer)
    record = json.loads(SAMPLES.read_text().splitlines()[0])
    sample = ReaderSample.from_record(record)
    rendered = render_reader_sample(generator.measure, tokenizer, 1, sample)
    sent = generator.measure(record["prompt"], record["system"]).ids
    assert tuple(rendered.input_ids[: len(sent)]) == sent  # the pipeline's own tokens, unchanged
    reply = rendered.input_ids[len(sent):]
    assert tokenizer.decode(reply[:-1]) == record["target"] and reply[-1] == 1
    assert rendered.labels[: len(sent)] == [IGNORE_INDEX] * len(sent) and rendered.labels[len(sent):] == reply


def test_the_loss_is_the_replys_cross_entropy_from_its_rows_alone():
    from memorag.training.reader_trainer import ReaderModel, load_base

    cfg = reader_config(Path("unused"))
    torch.manual_seed(0)
    model = ReaderModel(*load_base(cfg.model, torch.float32), cfg.adapter)
    input_ids = torch.randint(2, 200, (2, 12))
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[0, 8:] = input_ids[0, 8:]
    labels[1, 5:9] = input_ids[1, 5:9]  # a shorter reply, then padding
    output = model(input_ids, labels)
    logits = model.base_model(input_ids=input_ids).logits  # [2, 12, V], every row
    expected = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 labels[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX)
    assert int(output.loss_token_count) == 4 + 4
    torch.testing.assert_close(output.loss, expected)


def test_only_the_adapter_is_trained_and_saved(tmp_path):
    summary = run(reader_config(tmp_path, "optim.max_steps=2", "checkpoint.every_steps=2"))
    assert summary["reason"] == "finished" and summary["step"] == 2
    folder = tmp_path / "checkpoint-2"
    saved = load_file(str(folder / "adapter_model.safetensors"))
    assert saved and all("lora_" in name for name in saved)
    assert not (folder / "memory_weights.safetensors").exists() and ckpt.is_complete(folder)
    assert json.loads((folder / "adapter_config.json").read_text())["r"] == 4
    assert (tmp_path / "final" / "adapter_model.safetensors").is_file()
    losses = train_losses(tmp_path)
    assert sorted(losses) == [1, 2] and all(loss > 0 for loss in losses.values())


def test_a_stopped_and_resumed_run_ends_with_the_adapter_of_an_uninterrupted_one(tmp_path):
    settings = ["optim.max_steps=6", "optim.grad_accumulation=2", "checkpoint.every_steps=100"]
    resumed_equals_straight(run, reader_config, tmp_path, settings, 3, 6, "adapter_model.safetensors")
    first_state = json.loads((tmp_path / "resumed" / "checkpoint-6" / "data_state.json").read_text())
    assert first_state["sha256"] and first_state["num_samples"] == 8


def test_a_resume_over_rebuilt_data_is_refused(tmp_path):
    data = tmp_path / "samples.jsonl"
    data.write_text(SAMPLES.read_text())
    settings = ["optim.max_steps=4", f"data.files=[{data}]"]
    run(reader_config(tmp_path / "run", *settings, "optim.stop_at_step=1"))
    lines = data.read_text().splitlines()
    data.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")  # same samples, another order
    with pytest.raises(ConfigError, match="differ from those this run was trained on"):
        run(reader_config(tmp_path / "run", *settings))


def test_the_adapter_cannot_change_within_a_run(tmp_path):
    run(reader_config(tmp_path, "optim.max_steps=4", "optim.stop_at_step=1"))
    with pytest.raises(ConfigError, match="trained as another model: adapter.rank"):
        run(reader_config(tmp_path, "optim.max_steps=4", "adapter.rank=8", "checkpoint.resume_with_changes=true"))


def test_a_run_started_from_a_saved_adapter_begins_with_its_weights(tmp_path):
    from memorag.training.reader_trainer import ReaderModel, load_base

    run(reader_config(tmp_path / "first", "optim.max_steps=2"))
    saved = tmp_path / "first" / "final"
    first = load_file(str(saved / "adapter_model.safetensors"))
    run(reader_config(tmp_path / "second", "optim.max_steps=1", "optim.lr=1e-12", "optim.warmup_steps=0",
                      f"adapter.init_from={saved}"))
    second = load_file(str(tmp_path / "second" / "final" / "adapter_model.safetensors"))
    assert second.keys() == first.keys()
    for key in first:  # one step of a vanishing rate from the first run's weights, not from peft's start
        torch.testing.assert_close(second[key], first[key], atol=1e-9, rtol=0)
    other = reader_config(tmp_path / "third", "adapter.rank=8")
    model = ReaderModel(*load_base(other.model, torch.float32), other.adapter)
    with pytest.raises(Exception, match="size mismatch|lacks tensors"):
        model.load_adapter(saved)
    with pytest.raises(ConfigError, match="does not exist"):
        model.load_adapter(tmp_path / "nowhere")


def test_lowering_a_rank_keeps_the_closest_update_of_that_rank():
    from memorag.training.lora_rank import lower_rank, saved_rank

    torch.manual_seed(0)
    key = "base_model.model.layers.0.q_proj.lora_{}.weight"
    a, b = torch.randn(4, 12), torch.randn(10, 4)
    state = {key.format("A"): a, key.format("B"): b, "other": torch.ones(3)}
    assert saved_rank(state) == 4
    low = lower_rank(state, rank=2, scale=3.0)
    assert saved_rank(low) == 2 and low["other"] is state["other"]
    update = 3.0 * (b.double() @ a.double())
    s = torch.linalg.svdvals(update)
    error = torch.linalg.matrix_norm(update - low[key.format("B")].double() @ low[key.format("A")].double())
    torch.testing.assert_close(error, s[2:].square().sum().sqrt(), rtol=1e-5, atol=1e-6)  # Eckart-Young's bound
    exact = {key.format("A"): a[:2].clone(), key.format("B"): b[:, :2].clone()}  # already of rank 2 in 4 rows
    exact[key.format("A")] = torch.cat([exact[key.format("A")], torch.zeros(2, 12)])
    exact[key.format("B")] = torch.cat([exact[key.format("B")], torch.zeros(10, 2)], dim=1)
    kept = lower_rank(exact, rank=2, scale=1.0)
    torch.testing.assert_close(kept[key.format("B")] @ kept[key.format("A")], b[:, :2] @ a[:2], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="only a higher rank is lowered"):
        lower_rank(state, rank=5, scale=1.0)


def test_a_run_started_from_an_adapter_of_higher_rank_begins_with_its_update_lowered(tmp_path):
    from memorag.training.lora_rank import lower_rank, saved_rank
    from memorag.training.reader_trainer import ReaderModel, load_base

    run(reader_config(tmp_path / "first", "optim.max_steps=2", "optim.lr=1e-2"))  # rank 4, alpha 8: scale 2
    saved = tmp_path / "first" / "final"
    config = reader_config(tmp_path / "second", "adapter.rank=2", "adapter.alpha=1", f"adapter.init_from={saved}")
    model = ReaderModel(*load_base(config.model, torch.float32), config.adapter)
    model.load_adapter(saved, lower=True)
    started = {name.replace(".default", ""): p.detach() for name, p in model.adapter_parameters().items()}
    expected = lower_rank(load_file(str(saved / "adapter_model.safetensors")), rank=2, scale=2.0 / 0.5)
    assert started.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(started[key], expected[key].float(), rtol=1e-5, atol=1e-6)
    run(config)  # the run itself starts from there and trains at rank 2
    assert saved_rank(load_file(str(tmp_path / "second" / "final" / "adapter_model.safetensors"))) == 2
    higher = reader_config(tmp_path / "third", "adapter.rank=8")
    with pytest.raises(Exception, match="size mismatch|lacks tensors"):
        ReaderModel(*load_base(higher.model, torch.float32), higher.adapter).load_adapter(saved, lower=True)


@pytest.mark.parametrize("override, named", [
    ("adapter.rnk=4", "rnk"),
    ("model.memory_rank=4", "model.memory_rank"),
    ("loss.kind=distill", "loss.kind"),
    ("adapter.rank=0", "adapter.rank"),
])
def test_bad_settings_are_refused_with_one_error_line(tmp_path, capsys, override, named):
    status = train_main("reader", ["--config", str(DEBUG_READER), f"checkpoint.output_dir={tmp_path}", override])
    assert status == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("error: ") and named in error[-1]
    assert not list(tmp_path.glob("checkpoint-*"))


def test_a_config_of_another_stage_is_refused_by_the_reader_script(capsys):
    status = train_main("reader", ["--config", str(ROOT / "configs" / "debug-sft.yaml")])
    assert status == 2 and "train/sft.py" in capsys.readouterr().err


def test_the_shipped_reader_config_loads_and_names_the_embedded_base():
    cfg = load_config(TrainConfig, ROOT / "configs" / "reader" / "embedded.yaml")
    assert cfg.stage == "reader" and cfg.model.base == "embedded" and cfg.checkpoint.keep_last >= 1
    assert set(cfg.adapter.target_modules) <= {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                               "down_proj"}
