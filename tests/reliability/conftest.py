"""Shared pieces of the reliability battery: a tiny random language model saved as a local
model folder (with the embedded model's real tokenizer), so the real command line runs end to
end in seconds, and runners for the command line in this process and in a subprocess."""

from __future__ import annotations

import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORDS = ("the king queen river stone house bread wine field road city gate light night water fire "
         "mountain harbour lantern garden").split()
WINDOW = 32  # memory window of the tiny model runs
POSITIONS = 512  # the tiny model's positions: reach (512 - 32) * 4 + 32 = 1952 tokens at ratio 4


def text_of(words: int, seed: int) -> str:
    """Plain English-looking text of `words` words (about one token each)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "\n"


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory) -> Path:
    """A fake language model: a 2-layer random llama with the embedded model's tokenizer,
    saved as a local model folder (`--memory-model DIR`)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from memorag.generation.models import resolve_lm

    folder = tmp_path_factory.mktemp("tiny-lm")
    tokenizer = AutoTokenizer.from_pretrained(resolve_lm(None))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=POSITIONS,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def tiny_args(tiny_lm) -> list[str]:
    """Options that make any command use the tiny model and BM25 (no embedder to load)."""
    return ["--memory-model", str(tiny_lm), "--retriever", "bm25", "--set", f"memory.window={WINDOW}"]


# `ask` options that keep the tiny model's answers short.
SHORT = ["--set", "clue_max_new_tokens=4", "--max-new-tokens", "4", "--evidence-tokens", "320"]


class Result:
    def __init__(self, code: int, out: str, err: str):
        self.returncode, self.stdout, self.stderr = code, out, err

    def __repr__(self) -> str:
        return f"Result({self.returncode}, stdout={self.stdout[-300:]!r}, stderr={self.stderr[-600:]!r})"


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run `memorag ARGS...` in this process (no interpreter start-up per call)."""
    from memorag.commands.main import main

    monkeypatch.delenv("MEMORAG_DEBUG", raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def run_subprocess(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run `memorag ARGS...` as its own process."""
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    environment.pop("MEMORAG_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "memorag.commands.main", *map(str, args)], capture_output=True, text=True,
                          env=environment, timeout=timeout, cwd=ROOT)


def backticked(message: str) -> list[list[str]]:
    """The command lines or options a message suggests between backticks, split as a shell would."""
    import re

    return [shlex.split(command) for command in re.findall(r"`([^`]+)`", message)]
