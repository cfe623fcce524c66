"""The memory model computes what it computed when the goldens were recorded (tests/memory/goldens.py).

On every machine: each case's replies token for token, its tensors within a float tolerance
(a last bit differs between CPU kernels). On a machine of a kind whose outputs are recorded:
every tensor bit for bit, by sha256.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from .goldens import CASES, RECORD, TENSORS, machine_kind, run_case, sha256

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def recorded():
    return json.loads(RECORD.read_text()), load_file(str(TENSORS))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_outputs_are_the_recorded_ones(name, recorded):
    document, stored = recorded
    tensors, replies = run_case(name)
    if not name.startswith("bf16"):  # bf16 logits tie often: replies are compared bit for bit below
        assert replies == document["replies"][name]
    bf16 = name.startswith("bf16")
    for key, value in tensors.items():
        atol, rtol = (0.1, 0.05) if bf16 else (2e-5, 2e-5)  # bf16: a few of its steps (1/32 near 4 to 8)
        torch.testing.assert_close(value.to(torch.float32), stored[key], atol=atol, rtol=rtol, msg=key)
    hashes = document["sha256"].get(machine_kind())
    if hashes is None:
        pytest.skip(f"no bit-for-bit record for {machine_kind()} (recorded: {sorted(document['sha256'])}); "
                    "the values were compared within a tolerance")
    assert replies == document["kind_replies"][machine_kind()][name]
    changed = sorted(key for key, value in tensors.items() if sha256(value) != hashes[key])
    assert not changed, f"not bit for bit the recorded outputs: {changed}"
    assert sorted(tensors) == sorted(key for key in hashes if key.startswith(f"{name}/"))
