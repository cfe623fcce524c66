"""Fixtures for the evaluation-data tests: the fixture folder and two fake tokenizers."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

_WORD_OR_MARK = re.compile(r"\w+|[^\w\s]")


class WordPieceTokenizer:
    """A stand-in for a Hugging Face tokenizer: one token per word or punctuation mark."""

    name_or_path = "fake-word-piece"

    def encode(self, text: str, add_special_tokens: bool = True, verbose: bool = True) -> list[int]:
        return [1] * len(_WORD_OR_MARK.findall(text)) + ([0] if add_special_tokens else [])


class CharTokenizer:
    """A tiktoken-like tokenizer (``encode(text)`` only) that is not additive over pieces: ceil(chars / 4)."""

    def encode(self, text: str) -> list[int]:
        return list(range(math.ceil(len(text) / 4)))


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def word_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer()


@pytest.fixture
def char_tokenizer() -> CharTokenizer:
    return CharTokenizer()
