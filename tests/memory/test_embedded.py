"""The embedded SmolLM2 loads offline, memorizes a few thousand tokens and generates."""

from pathlib import Path

import pytest
import torch

from memorag.memory import Memory, MemoryConfig, MemoryModel
from memorag.runtime.cpu_dtype import native_on_cpu

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kjv_ruth_esther_jonah.txt"


@pytest.mark.slow
def test_embedded_model_memorizes_and_generates(tmp_path):
    # ratio 1024: no memory token is inserted before the 1024th raw token, so a context and
    # answer within one window are read exactly as plain transformers reads them
    model = MemoryModel.from_pretrained(config=MemoryConfig(window=1024, ratios=[1024]))
    config = model.base_model.config
    assert (config.model_type, config.num_hidden_layers, config.hidden_size) == ("llama", 30, 576)
    # "auto": the checkpoint's bf16 where this CPU computes it natively, else float32 (memorag/runtime/cpu_dtype.py)
    assert model.dtype == (torch.bfloat16 if native_on_cpu(torch.bfloat16) else torch.float32) and model.layout.chat
    # The token-for-token comparison below runs in float32 on every CPU: in bf16 the window read and
    # transformers' whole-prompt read sum in different orders, and near-ties break differently by CPU.
    model = model.to(torch.float32)

    text = EXAMPLE.read_text()
    short = text[:2500]
    memory = model.memorize(short)
    assert memory.num_entries == 0 and 500 < memory.num_tokens < 1024
    question = "Who were the two sons of Elimelech?"
    answer = model.generate(question, memory=memory, max_new_tokens=24)
    prompt = model.tokenizer.apply_chat_template(
        [{"role": "user", "content": short + "\n\n" + question}], add_generation_prompt=True, tokenize=False
    )
    ids = model.tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        plain = model.base_model.generate(ids, max_new_tokens=24, do_sample=False)
    assert answer == model.tokenizer.decode(plain[0, ids.shape[1] :], skip_special_tokens=True)
    assert "Mahlon" in answer and "Chilion" in answer

    # a few thousand tokens: windows are compacted into memory entries
    model = MemoryModel.from_pretrained(config=MemoryConfig(window=1024, ratios=[4]))
    memory = model.memorize(text[:14000])
    assert memory.num_tokens > 3000
    assert memory.num_entries == (memory.num_tokens // 1024) * 256
    memory.save(tmp_path / "memory")
    reloaded = Memory.load(tmp_path / "memory")
    out = model.generate("What happened next?", memory=reloaded, max_new_tokens=8)
    assert isinstance(out, str)
