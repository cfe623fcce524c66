"""Device, dtype, quantization and threads (memorag.runtime.placement): names, this machine's checks, the
loading arguments, and the CUDA/bitsandbytes paths with a CUDA GPU faked (they cannot run here)."""

from __future__ import annotations

import argparse
import importlib.util

import pytest
import torch

from memorag.config import ConfigError, load_config
from memorag.pipeline import PipelineConfig
from memorag.runtime.placement import (
    Placement,
    PlacementError,
    add_placement_arguments,
    normalize_dtype,
    normalize_quantize,
    placement_overrides,
    set_threads,
)
from tests.fake_gpu import fake_gpu, no_gpu  # noqa: F401 - fixtures, used by name


def test_names_are_checked_and_made_canonical():
    assert [normalize_dtype(name) for name in ("auto", "bf16", "BFloat16", "fp32", "half", torch.float16)] == [
        "auto", "bfloat16", "bfloat16", "float32", "float16", "float16"]
    assert [normalize_quantize(value) for value in (None, "none", "4bit", "8-bit", 4)] == [None, None, "4bit", "8bit",
                                                                                          "4bit"]
    config = PipelineConfig(device="CUDA:1", dtype="bf16", quantize="4-bit", threads=3)
    assert (config.device, config.dtype, config.quantize, config.threads) == ("cuda:1", "bfloat16", "4bit", 3)
    for settings, message in [({"device": "gpu"}, "device='gpu'"), ({"dtype": "int8"}, "dtype='int8'"),
                              ({"quantize": "2bit"}, "quantize='2bit'"), ({"threads": 0}, "threads=0")]:
        with pytest.raises(ConfigError, match=message):
            PipelineConfig(**settings)
    defaults = PipelineConfig()
    assert (defaults.device, defaults.dtype, defaults.quantize, defaults.threads) == ("auto", "auto", None, None)


@pytest.mark.usefixtures("no_gpu")
def test_auto_is_cuda_when_present_else_cpu(monkeypatch):
    cpu = Placement.resolve()
    assert cpu.device == "cpu"
    assert cpu.lm_kwargs() == {"dtype": "auto"}  # no device_map on the CPU: transformers' own default
    assert Placement.resolve("cpu", "bfloat16").lm_kwargs() == {"dtype": torch.bfloat16}
    assert cpu.embedder_kwargs() == {"device": "cpu"}  # "auto": the embedder's float32
    assert Placement.resolve("cpu", "bf16").embedder_kwargs() == {"device": "cpu",
                                                                  "model_kwargs": {"dtype": torch.bfloat16}}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    gpu = Placement.resolve()
    assert gpu.device == "cuda"
    assert gpu.lm_kwargs() == {"dtype": "auto", "device_map": {"": "cuda"}}
    assert gpu.embedder_kwargs() == {"device": "cuda"}


@pytest.mark.usefixtures("no_gpu")
def test_a_gpu_this_machine_lacks_is_refused_clearly(monkeypatch):
    with pytest.raises(PlacementError, match="device='cuda' but torch sees no CUDA GPU here.*use --device cpu"):
        Placement.resolve("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(PlacementError, match="has 1 CUDA GPU"):
        Placement.resolve("cuda:1")


@pytest.mark.parametrize("quantize", ["4bit", "8bit"])
@pytest.mark.usefixtures("no_gpu")
def test_quantized_loading_without_cuda_fails_before_loading(quantize):
    with pytest.raises(PlacementError) as error:
        Placement.resolve("auto", "auto", quantize)
    message = str(error.value)
    assert message.startswith(f"--load-in-{quantize} needs a CUDA GPU and bitsandbytes: pip install 'bitsandbytes")
    assert "this machine has no CUDA GPU" in message
    config = PipelineConfig(quantize=quantize)  # the setting itself is valid: only this machine cannot do it
    with pytest.raises(PlacementError, match="needs a CUDA GPU"):
        Placement.of(config)


@pytest.mark.usefixtures("fake_gpu")
def test_quantized_loading_on_a_gpu_without_bitsandbytes_names_it(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "bitsandbytes" else real_find_spec(name, *args))
    with pytest.raises(PlacementError, match="bitsandbytes not installed; pip install 'bitsandbytes>=0.46.1'"):
        Placement.resolve("cuda", "auto", "4bit")
    with pytest.raises(PlacementError, match="device='cpu'"):  # a GPU is there, but the CPU was asked for
        Placement.resolve("cpu", "auto", "8bit")


@pytest.mark.usefixtures("fake_gpu")
def test_bitsandbytes_settings_on_a_gpu():
    four = Placement.resolve("auto", "auto", "4bit").lm_kwargs()
    config = four["quantization_config"]
    assert four["device_map"] == {"": "cuda"} and four["dtype"] == "auto"
    assert config.load_in_4bit and not config.load_in_8bit
    assert (config.bnb_4bit_quant_type, config.bnb_4bit_use_double_quant) == ("nf4", True)
    assert config.bnb_4bit_compute_dtype == torch.bfloat16
    half = Placement.resolve("cuda:0", "float16", "4bit").lm_kwargs()
    assert half["quantization_config"].bnb_4bit_compute_dtype == torch.float16 and half["dtype"] == torch.float16
    eight = Placement.resolve("cuda", "auto", "8bit").lm_kwargs()["quantization_config"]
    assert eight.load_in_8bit and not eight.load_in_4bit


def test_threads_are_set_for_torch():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        set_threads(None)
        assert torch.get_num_threads() == 3
        set_threads(2)
        assert torch.get_num_threads() == 2
        with pytest.raises(ConfigError, match="threads=0"):
            set_threads(0)
    finally:
        torch.set_num_threads(before)


def test_command_line_flags_become_settings():
    parser = argparse.ArgumentParser()
    add_placement_arguments(parser)
    args = parser.parse_args(["--device", "cuda:0", "--dtype", "bf16", "--load-in-4bit", "--threads", "4"])
    items = placement_overrides(args)
    assert items == ["device=cuda:0", "dtype=bf16", "threads=4", "quantize=4bit"]
    config = load_config(PipelineConfig, None, items)
    assert (config.device, config.dtype, config.quantize, config.threads) == ("cuda:0", "bfloat16", "4bit", 4)
    assert placement_overrides(parser.parse_args(["--load-in-8bit"])) == ["quantize=8bit"]
    assert placement_overrides(parser.parse_args(["--compile-decoding"])) == ["compile_decoding=default"]
    compiled = placement_overrides(parser.parse_args(["--compile-decoding", "reduce-overhead"]))
    assert load_config(PipelineConfig, None, compiled).compile_decoding == "reduce-overhead"
    windows = placement_overrides(parser.parse_args(["--compile-windows"]))
    assert windows == ["compile_windows=default"]
    assert load_config(PipelineConfig, None, windows).compile_windows == "default"
    assert placement_overrides(parser.parse_args([])) == []
    with pytest.raises(SystemExit):
        parser.parse_args(["--load-in-4bit", "--load-in-8bit"])
