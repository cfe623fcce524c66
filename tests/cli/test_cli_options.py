"""The command line's device, precision and thread options, and the answer's header per mode."""

from __future__ import annotations

import pytest

from memorag.commands.main import _overrides, answer_header, build_parser, main
from memorag.pipeline import get_mode
from tests.cli.test_cli import run_cli


@pytest.mark.parametrize("command", ["memorize", "ask", "clues"])
def test_device_options_become_pipeline_settings(command):
    target = ["a.txt", "--out", "x"] if command == "memorize" else ["--context", "a.txt", "a question"]
    args = build_parser().parse_args([command, *target, "--device", "cpu", "--dtype", "bf16", "--threads", "2",
                                      "--load-in-8bit"])
    assert _overrides(args) == {"device": "cpu", "dtype": "bfloat16", "threads": 2, "quantize": "8bit"}
    plain = build_parser().parse_args([command, *target])
    assert not {"device", "dtype", "threads", "quantize"} & set(_overrides(plain))


def test_the_flags_become_typed_settings_and_set_adds_to_them():
    """`--ratio`, `--timeout`, `--chunk-tokens`... arrive as the values argparse read (no text in between);
    `--set` adds to a section a flag opened, and a refused value names its flag."""
    from memorag.config import ConfigError
    from memorag.memory import MemoryConfig

    args = build_parser().parse_args(["memorize", "a.txt", "--out", "x", "--ratio", "2", "--timeout", "7.5",
                                      "--chunk-tokens", "40", "--set", "memory.window=512", "--set",
                                      "evidence_tokens=900"])
    settings = _overrides(args)
    assert settings == {"timeout": 7.5, "chunk_tokens": 40, "memory": MemoryConfig(window=512, ratios=[2]),
                        "evidence_tokens": 900}
    assert type(settings["timeout"]) is float and type(settings["chunk_tokens"]) is int
    with pytest.raises(ConfigError, match="^--chunk-tokens: "):
        _overrides(build_parser().parse_args(["memorize", "a.txt", "--out", "x", "--chunk-tokens", "2"]))


def test_every_command_lists_the_options():
    for command in ("memorize", "ask", "clues"):
        shown = run_cli(command, "--help").stdout
        assert all(flag in shown for flag in ("--device", "--dtype", "--load-in-4bit", "--load-in-8bit", "--threads"))


def test_answer_header_names_the_mode_and_memory_alone_only_for_memory_answers():
    assert answer_header(get_mode("memorag"), "qa") == "answer (memorag, from memory alone):"
    assert answer_header(get_mode("memorag"), "memorag") == "answer (memorag):"
    for mode in ("rag", "dos", "hyde", "rqrag", "longrag", "mixpr", "full"):
        header = answer_header(get_mode(mode), "qa")
        assert header == f"answer ({mode}):" and "memory" not in header
    assert answer_header(get_mode("cic"), "retrieval") == "answer (cic):"


def test_gpu_only_options_fail_before_any_work_on_a_cpu_machine(short_text, capsys):  # noqa: F811
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    for flags, message in [(["--load-in-4bit"], "--load-in-4bit needs a CUDA GPU and bitsandbytes: pip install"),
                           (["--load-in-8bit"], "--load-in-8bit needs a CUDA GPU and bitsandbytes: pip install"),
                           (["--device", "cuda"], "device='cuda' but torch sees no CUDA GPU")]:
        assert main(["ask", "--context", str(short_text), "Who went to Moab?", *flags]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"memorag: error: {message}") and "memorizing" not in err, err
    assert main(["ask", "--context", str(short_text), "Who went to Moab?", "--dtype", "int4"]) == 2
    assert "dtype='int4'" in capsys.readouterr().err
