"""Reader samples: an answer prompt as the pipeline sends it, and the reply the reader should write.

Format: one JSON object per line,

    {"prompt": "<the answer prompt's text: the task's template over the rendered passages>",
     "system": "<the generator's system prompt, or null (benchmark forms send none)>",
     "target": "<the reply: a short answer span, or NO_ANSWER_REPLY>",
     "task": "...", "id": "...", ...}

`prompt` and `target` are required non-empty strings; other keys (ids, provenance, the
evidence's size) are ignored by training. `memorag.training.reader_data` writes them from
the pipeline's own evidence step.

Rendering uses the generator's own measurement of a prompt (`Generator.measure`: its
chat template with the generation prompt, exactly the token ids the pipeline hands to
`generate_measured`), followed by the target's tokens and the generator's stop token (where
decoding ends). Labels are -100 on every prompt token, so the loss is on the reply only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .sft import IGNORE_INDEX, TokenizedSample, checked_fields

REQUIRED_FIELDS = ("prompt", "target")


@dataclass(frozen=True)
class ReaderSample:
    prompt: str
    target: str
    system: str | None = None

    @classmethod
    def from_record(cls, record: Any, where: str = "record") -> ReaderSample:
        system = checked_fields(record, REQUIRED_FIELDS, "a reader", where)
        return cls(record["prompt"], record["target"], system)


def render_reader_sample(measure: Callable[[str, str | None], Any], tokenizer, stop_id: int | None,
                         sample: ReaderSample) -> TokenizedSample:
    """Token ids and labels of one sample: the prompt as `measure` (a generator's) gives it, then the
    target and `stop_id`; the loss is on the target and the stop token only."""
    prompt_ids = list(measure(sample.prompt, sample.system).ids)
    target_ids = list(tokenizer(sample.target, add_special_tokens=False)["input_ids"])
    if stop_id is not None:
        target_ids.append(int(stop_id))
    if not target_ids:
        raise ValueError("the target renders to no tokens")
    return TokenizedSample(prompt_ids + target_ids, [IGNORE_INDEX] * len(prompt_ids) + target_ids)
