"""Generated long-context tasks, seeded and reproducible, with their gold evidence positions.

Every number measured on these tasks is a **proxy**: the tasks follow the
shape of RULER, Hash-Hop and BABILong but are our own generators on our own
filler, so their scores are not comparable with the published ones. Each
example has ``proxy=True`` and a task name starting with ``synthetic_``.

Tasks (``generate_examples(task, num_examples, target_tokens, ...)``):

* ``niah_single``, ``niah_multikey``, ``niah_multivalue``, ``niah_multiquery`` -
  needle-in-a-haystack after RULER: needles ``A special magic number for KEY
  is: VALUE.`` hidden in filler; keys and values are random words
  (adjective-noun), 7-digit numbers or uuids (``key_type``, ``value_type``).
  Multi-key adds needles with other keys; multi-value gives one key several
  values; multi-query asks for several keys at once. Metric ``string_match_all``.
* ``variable_tracking`` - chains ``VAR ABCDE = 12345.``, ``VAR FGHIJ = ABCDE.``
  spread through filler, in order; find every variable holding the value.
* ``common_words`` - a numbered list where ``num_common`` words occur
  ``common_freq`` times and the rest ``rare_freq`` times; name the common ones.
* ``frequent_words`` - coded words drawn with Zipf frequencies (alpha 2); name
  the ``num_answers`` most frequent. A global task: its evidence is the word
  counts, without positions.
* ``hashhop`` - lines ``a3f9... -> 07bc...`` (random 16-hex-digit hashes) in
  random order; follow the chain from a start hash ``hops`` times (1-4).
  Distractor lines form chains of the same length. Task name
  ``synthetic_hashhop_{hops}hop``.
* ``babilong_qa1``, ``babilong_qa2``, ``babilong_qa3`` - bAbI-style stories
  (one, two or three supporting facts: where is a person / an object / where
  was an object before a place) whose facts are spread, in order, through the
  filler; answers are BABILong location labels; metric ``babilong_answer_correct``.

Lengths: ``target_tokens`` is the length of the *context* (the question is
extra), measured by :class:`~memorag.evaluation.datasets.lengths.LengthCounter`: exactly
with a tokenizer, else as whitespace words times ``tokens_per_word`` (random
hashes, uuids and numbers take far more real tokens than 1.3 per word). The
context never exceeds the target and, with the default tolerance, is within 2%
below it (the granularity of one filler unit permitting). Targets from 8K to
1M are supported; the KJV filler (about 1.03M approximate tokens) wraps around
beyond that.

Seeding: example ``index`` of ``task`` with ``seed`` is drawn from its own
``random.Random(f"{task}:{seed}:{index}")``, so examples are independent of how
many are generated and the needle/question of an index is the same at every
length.
"""

from __future__ import annotations

import bisect
import inspect
import itertools
import math
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memorag.evaluation.datasets.filler import Filler, cycle_units, get_filler
from memorag.evaluation.datasets.lengths import TOKENS_PER_WORD, LengthCounter, count_words
from memorag.evaluation.datasets.schema import EvalExample

SYNTHETIC_PREFIX = "synthetic_"
PROXY_NOTE = "generated task: its scores are proxies, not comparable with published benchmark figures"
DEFAULT_TOLERANCE = 0.02

KEY_KINDS = ("words", "numbers", "uuids")
_KIND_NOUN = {"words": "word", "numbers": "number", "uuids": "uuid"}

_ADJECTIVES = tuple(
    """
    amber ancient bitter bold brave bright calm clever cold crimson curious dark distant dry eager
    early empty faint fierce gentle golden grand green hidden hollow humble icy late lazy little
    lonely loud lucky mighty misty narrow noble old pale patient proud quick quiet rapid rough round
    rusty salty sharp shy silent silver slow small smooth soft steady stormy sudden sweet swift tall
    tender tiny velvet warm wild wise young
    """.split()
)
_NOUNS = tuple(
    """
    anchor apron arrow badger banner barrel basket beacon bell blossom bridge bucket candle canyon
    castle cedar chimney clover comet compass coral cricket crown desert falcon feather fern fiddle
    forest fountain garnet glacier harbor hammer helmet island jasmine kettle ladder lantern lemon
    lighthouse maple meadow mirror needle orchard otter pebble pepper pillow pine quarry raven
    ribbon river saddle sparrow spindle thimble thunder tulip valley violin walnut willow window
    wizard
    """.split()
)
_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"

PEOPLE = ("Mary", "John", "Daniel", "Sandra")
OBJECTS = ("football", "apple", "milk")
LOCATIONS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
"""BABILong's qa1-qa3 answer labels (``memorag.evaluation.metrics.BABILONG_TASK_LABELS``)."""
_MOVE_VERBS = ("went to", "journeyed to", "travelled to", "moved to", "went back to")
_GRAB_VERBS = ("picked up", "got", "grabbed", "took")
_DROP_VERBS = ("dropped", "put down", "discarded", "left")


# ---------------------------------------------------------------------------
# Random pieces
# ---------------------------------------------------------------------------


def _random_value(rng: random.Random, kind: str) -> str:
    if kind == "numbers":
        return str(rng.randint(1_000_000, 9_999_999))
    if kind == "words":
        return f"{rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}"
    if kind == "uuids":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    raise ValueError(f"unknown key/value kind {kind!r}; choose one of {', '.join(KEY_KINDS)}")


def _distinct_values(rng: random.Random, kind: str, count: int, avoid: set[str] | None = None) -> list[str]:
    seen = set(avoid or ())
    values: list[str] = []
    while len(values) < count:
        value = _random_value(rng, kind)
        if value not in seen:
            seen.add(value)
            values.append(value)
    return values


def _pseudo_words(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct pronounceable made-up words of 2-3 consonant-vowel syllables."""
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < count:
        syllables = rng.choice((2, 3, 3))
        word = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _random_hash(rng: random.Random, chars: int) -> str:
    return format(rng.getrandbits(4 * chars), f"0{chars}x")


# ---------------------------------------------------------------------------
# Composition: units of filler with inserted pieces, fitted to a length
# ---------------------------------------------------------------------------


@dataclass
class _Insert:
    """A piece put into the haystack at ``depth`` (0 = start, 1 = end); ``evidence`` None = not gold."""

    text: str
    depth: float
    evidence: dict[str, Any] | None = None


@dataclass
class _Composed:
    context: str
    spans: list[tuple[int, int]]
    length: int
    num_units: int


def _units_within(prefix: Sequence[float], start: int, budget: float, cyclic: bool) -> int:
    """How many consecutive units from ``start`` cost at most ``budget`` (prefix sums, wrapping if cyclic)."""
    count = len(prefix) - 1
    if budget <= 0 or count == 0:
        return 0
    if not cyclic:
        return bisect.bisect_right(prefix, budget) - 1
    total = prefix[-1]
    full = int(budget // total) if total > 0 else 0
    rest = budget - full * total
    tail = prefix[count] - prefix[start]
    if rest >= tail:
        extra = (count - start) + bisect.bisect_right(prefix, rest - tail) - 1
    else:
        extra = bisect.bisect_right(prefix, prefix[start] + rest) - 1 - start
    return full * count + extra


def _render(
    units: Sequence[str], start: int, count: int, separator: str, inserts: Sequence[_Insert], cyclic: bool
) -> tuple[str, list[tuple[int, int]]]:
    taken = cycle_units(units, start, count) if cyclic and count else list(units[:count])
    slots = [min(count, max(0, round(insert.depth * count))) for insert in inserts]
    order = sorted(range(len(inserts)), key=lambda i: (slots[i], i))
    pieces: list[str] = []
    spans: list[tuple[int, int]] = [(0, 0)] * len(inserts)
    position = 0

    def add(text: str) -> tuple[int, int]:
        nonlocal position
        if pieces:
            pieces.append(separator)
            position += len(separator)
        pieces.append(text)
        begin = position
        position += len(text)
        return begin, position

    next_insert = 0
    for unit_index in range(count + 1):
        while next_insert < len(order) and slots[order[next_insert]] == unit_index:
            spans[order[next_insert]] = add(inserts[order[next_insert]].text)
            next_insert += 1
        if unit_index < count:
            add(taken[unit_index])
    return "".join(pieces), spans


def _compose(
    rng: random.Random,
    units: Sequence[str],
    separator: str,
    inserts: Sequence[_Insert],
    target: int,
    counter: LengthCounter,
    *,
    cyclic: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
) -> _Composed:
    """Consecutive units (from a seeded offset) plus the inserts at their depths, at most ``target`` long."""
    insert_cost = sum(counter.cost(insert.text) for insert in inserts)
    budget = target - insert_cost
    if budget < 0:
        raise ValueError(
            f"target {target} is too small for the {len(inserts)} inserted pieces "
            f"({insert_cost:.0f} {counter.unit}); raise the target length"
        )
    if cyclic:
        prefix = counter.unit_prefix(units)
    else:
        prefix = list(itertools.accumulate((counter.cost(unit) for unit in units), initial=0.0))
    start = rng.randrange(len(units)) if cyclic else 0
    count = _units_within(prefix, start, budget, cyclic)
    limit = math.inf if cyclic else len(units)
    average = max(prefix[-1] / max(1, len(units)), 1e-9)
    context, spans = _render(units, start, count, separator, inserts, cyclic)
    length = counter(context)
    if counter.exact:  # a tokenizer is not exactly additive over pieces: correct on the whole text
        for _ in range(12):
            if length > target and count > 0:
                count = max(0, count - max(1, math.ceil((length - target) / average)))
            elif length < target * (1 - tolerance) and count < limit:
                grow = math.floor((target - length) / average)
                if grow < 1:
                    break
                count = int(min(limit, count + grow))
            else:
                break
            context, spans = _render(units, start, count, separator, inserts, cyclic)
            length = counter(context)
        while length > target and count > 0:
            count -= 1
            context, spans = _render(units, start, count, separator, inserts, cyclic)
            length = counter(context)
    if length > target:
        raise ValueError(f"cannot fit the inserted pieces into {target} {counter.unit} (they take {length})")
    return _Composed(context, spans, length, count)


def _insert_evidence(
    inserts: Sequence[_Insert], spans: Sequence[tuple[int, int]], gold: bool = True
) -> list[dict[str, Any]]:
    return [
        {**(insert.evidence or {}), "text": insert.text, "start": start, "end": end}
        for insert, (start, end) in zip(inserts, spans)
        if (insert.evidence is not None) == gold
    ]


def _fit_count(
    build: Callable[[int], tuple[str, Any]],
    initial: int,
    unit_cost: float,
    target: int,
    counter: LengthCounter,
    tolerance: float,
) -> tuple[int, str, Any, int]:
    """Find a count of generated items whose built text is at most ``target`` (within ``tolerance`` below)."""
    count = max(1, initial)
    context, extra = build(count)
    length = counter(context)
    for _ in range(12):
        if length > target and count > 1:
            count = max(1, count - max(1, math.ceil((length - target) / unit_cost)))
        elif length < target * (1 - tolerance):
            grow = math.floor((target - length) / unit_cost)
            if grow < 1:
                break
            count += grow
        else:
            break
        context, extra = build(count)
        length = counter(context)
    while length > target and count > 1:
        count -= 1
        context, extra = build(count)
        length = counter(context)
    if length > target:
        raise ValueError(
            f"target {target} is too small for this task (the smallest instance takes {length} {counter.unit})"
        )
    return count, context, extra, length


@dataclass
class _Draft:
    """What a task builder returns; the wrapper turns it into an :class:`EvalExample`."""

    question: str
    answers: list[str]
    context: str
    gold: list[dict[str, Any]]
    length: int
    metric: str = "string_match_all"
    task_name: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    uses_filler: bool = True


# ---------------------------------------------------------------------------
# RULER-style needles
# ---------------------------------------------------------------------------


def _needles(rng: random.Random, keys: list[str], query_keys: list[str], value_type: str, noun: str,
             num_values: int, depth: float | None) -> tuple[list[_Insert], list[str]]:
    """The needles, shuffled (`num_values` for each key asked about, one for each other key, each at
    `depth` or a random depth), and the values asked for."""
    values_needed = len(query_keys) * num_values + (len(keys) - len(query_keys))
    values = iter(_distinct_values(rng, value_type, values_needed, avoid=set(keys)))
    inserts: list[_Insert] = []
    answers: list[str] = []
    for key in keys:
        is_query = key in query_keys
        for _ in range(num_values if is_query else 1):
            value = next(values)
            needle_depth = depth if depth is not None else rng.random()
            evidence = {"kind": "needle", "key": key, "value": value} if is_query else None
            inserts.append(_Insert(f"A special magic {noun} for {key} is: {value}.", needle_depth, evidence))
            if is_query:
                answers.append(value)
    rng.shuffle(inserts)
    return inserts, answers


def _needle_question(noun: str, query_keys: list[str], num_values: int) -> str:
    if len(query_keys) == 1 and num_values == 1:
        return f"What is the special magic {noun} for {query_keys[0]} mentioned in the text above?"
    if len(query_keys) == 1:
        return f"What are all the special magic {noun}s for {query_keys[0]} mentioned in the text above?"
    listed = ", ".join(query_keys[:-1]) + f" and {query_keys[-1]}"
    return f"What are all the special magic {noun}s for {listed} mentioned in the text above?"


def _niah(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    key_type: str,
    value_type: str,
    num_keys: int = 1,
    num_values: int = 1,
    num_queries: int = 1,
    depth: float | None = None,
) -> _Draft:
    """The RULER needle task; the ``niah_*`` builders below are its four shapes (one needle by default)."""
    if num_keys < 1 or num_values < 1 or num_queries < 1:
        raise ValueError("num_keys, num_values and num_queries must be >= 1")
    if depth is not None and not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth}")
    noun = _KIND_NOUN.get(value_type)
    if noun is None or key_type not in KEY_KINDS:
        raise ValueError(f"key_type and value_type must be among {KEY_KINDS}")
    keys = _distinct_values(rng, key_type, max(num_keys, num_queries))
    query_keys = keys[:num_queries]
    inserts, answers = _needles(rng, keys, query_keys, value_type, noun, num_values, depth)
    composed = _compose(rng, filler.units, filler.separator, inserts, target, counter, tolerance=tolerance)
    question = _needle_question(noun, query_keys, num_values)
    gold = _insert_evidence(inserts, composed.spans)
    distractors = _insert_evidence(inserts, composed.spans, gold=False)
    # RULER's own prompt (memorag/prompting/answer_forms.py): its query joins the keys as RULER's niah.py does
    ruler_query = ", ".join(query_keys[:-1]) + ", and " + query_keys[-1] if len(query_keys) > 1 else query_keys[0]
    return _Draft(
        question=question,
        answers=answers,
        context=composed.context,
        gold=gold,
        length=composed.length,
        meta={
            "distractor_spans": [[d["start"], d["end"]] for d in distractors],
            "depths": [i.depth for i in inserts],
            "answer_prompt": {"name": "ruler:niah", "fields": {
                "type_needle_v": value_type, "query": ruler_query,
                "single": "true" if num_queries * num_values == 1 else "false"}},
        },
    )


def niah_single(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    key_type: str = "words",
    value_type: str = "numbers",
    depth: float | None = None,
) -> _Draft:
    """One needle; ask for its value."""
    return _niah(
        rng, target, counter, filler, tolerance, key_type=key_type, value_type=value_type, depth=depth
    )


def niah_multikey(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    num_keys: int = 4,
    key_type: str = "words",
    value_type: str = "numbers",
) -> _Draft:
    """``num_keys`` needles with different keys; ask for one key's value."""
    return _niah(
        rng, target, counter, filler, tolerance, key_type=key_type, value_type=value_type, num_keys=num_keys
    )


def niah_multivalue(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    num_values: int = 4,
    key_type: str = "words",
    value_type: str = "numbers",
) -> _Draft:
    """One key with ``num_values`` needles; ask for all its values."""
    return _niah(
        rng,
        target,
        counter,
        filler,
        tolerance,
        key_type=key_type,
        value_type=value_type,
        num_values=num_values,
    )


def niah_multiquery(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    num_queries: int = 4,
    key_type: str = "words",
    value_type: str = "numbers",
) -> _Draft:
    """``num_queries`` keys, one needle each; ask for all of them at once."""
    return _niah(
        rng,
        target,
        counter,
        filler,
        tolerance,
        key_type=key_type,
        value_type=value_type,
        num_keys=num_queries,
        num_queries=num_queries,
    )


def variable_tracking(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    num_chains: int = 1,
    num_hops: int = 4,
) -> _Draft:
    """Chains of ``VAR`` assignments in filler; find all variables holding the first chain's value."""
    if num_chains < 1 or num_hops < 1:
        raise ValueError("num_chains and num_hops must be >= 1")
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < num_chains * (num_hops + 1):
        name = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(5))
        if name not in seen:
            seen.add(name)
            names.append(name)
    values = [str(v) for v in rng.sample(range(10_000, 100_000), num_chains)]
    inserts: list[_Insert] = []
    chains = []
    for chain in range(num_chains):
        chain_names = names[chain * (num_hops + 1) : (chain + 1) * (num_hops + 1)]
        chains.append(chain_names)
        depths = sorted(rng.random() for _ in chain_names)
        for hop, (name, chain_depth) in enumerate(zip(chain_names, depths)):
            source = values[chain] if hop == 0 else chain_names[hop - 1]
            evidence = {"kind": "assignment", "variable": name, "hop": hop} if chain == 0 else None
            inserts.append(_Insert(f"VAR {name} = {source}.", chain_depth, evidence))
    composed = _compose(rng, filler.units, filler.separator, inserts, target, counter, tolerance=tolerance)
    return _Draft(
        question=(
            f"Which variables are assigned the value {values[0]}, directly or through a chain of assignments, "
            "in the text above? List them all."
        ),
        answers=list(chains[0]),
        context=composed.context,
        gold=_insert_evidence(inserts, composed.spans),
        length=composed.length,
        meta={"value": values[0], "chains": chains,
              "answer_prompt": {"name": "ruler:variable_tracking",
                                "fields": {"query": values[0], "num_v": str(len(chains[0]))}}},
    )


# ---------------------------------------------------------------------------
# Word counting: common words, frequent coded words
# ---------------------------------------------------------------------------


def common_words(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    num_common: int = 10,
    common_freq: int = 30,
    rare_freq: int = 3,
) -> _Draft:
    """A numbered word list: ``num_common`` words ``common_freq`` times each, the rest ``rare_freq`` times."""
    if num_common < 1 or not common_freq > rare_freq >= 1:
        raise ValueError("need num_common >= 1 and common_freq > rare_freq >= 1")
    header = "Here is a long numbered list of words; a few of them come up far more often than the rest."
    base_seed = rng.getrandbits(64)

    def build(num_rare: int) -> tuple[str, list[dict[str, Any]]]:
        local = random.Random(base_seed)
        words = _pseudo_words(local, num_common + num_rare)
        common, rare = words[:num_common], words[num_common:]
        entries = common * common_freq + rare * rare_freq
        local.shuffle(entries)
        pieces, evidence, position = [header], [], len(header)
        common_set = set(common)
        for number, word in enumerate(entries, start=1):
            line = f"\n{number}. {word}"
            word_start = position + len(line) - len(word)
            pieces.append(line)
            position += len(line)
            if word in common_set:
                evidence.append({"kind": "occurrence", "text": word, "start": word_start, "end": position})
        return "".join(pieces), (common, evidence)

    entry_cost = counter.cost("1000. wordword")
    initial = math.floor(
        (target - counter.cost(header) - num_common * common_freq * entry_cost) / (rare_freq * entry_cost)
    )
    if initial < 1:
        raise ValueError(f"target {target} is too small for {num_common} common words x {common_freq}")
    _, context, (common, evidence), length = _fit_count(
        build, initial, rare_freq * entry_cost, target, counter, tolerance
    )
    return _Draft(
        question=f"Which {num_common} words appear most often in the numbered list above? Give all {num_common}.",
        answers=list(common),
        context=context,
        gold=evidence,
        length=length,
        meta={"common_freq": common_freq, "rare_freq": rare_freq,
              # RULER's prompt asks for the 10 most common words
              **({"answer_prompt": {"name": "ruler:common_words_extraction"}} if num_common == 10 else {})},
        uses_filler=False,
    )


def frequent_words(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    num_answers: int = 3,
    alpha: float = 2.0,
) -> _Draft:
    """Coded words with Zipf(alpha) frequencies; name the ``num_answers`` most frequent (counts as evidence)."""
    if num_answers < 1 or alpha <= 0:
        raise ValueError("need num_answers >= 1 and alpha > 0")
    header = "Below is a text made of coded words. Keep count of how often each coded word occurs."
    base_seed = rng.getrandbits(64)

    def build(total_words: int) -> tuple[str, list[tuple[str, int]]]:
        local = random.Random(base_seed)
        vocabulary = max(num_answers + 1, min(5000, total_words // 4))
        weights = [rank**-alpha for rank in range(1, vocabulary + 1)]
        scale = total_words / sum(weights)
        counts = [math.floor(weight * scale) for weight in weights]
        counts[0] += total_words - sum(counts)
        codes: list[str] = []
        seen: set[str] = set()
        while len(codes) < vocabulary:
            code = "".join(local.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))
            if code not in seen:
                seen.add(code)
                codes.append(code)
        words = [code for code, count in zip(codes, counts) for _ in range(count)]
        local.shuffle(words)
        lines = [" ".join(words[i : i + 20]) for i in range(0, len(words), 20)]
        return header + "\n" + "\n".join(lines), list(zip(codes, counts))

    word_cost = counter.cost("abcde")
    initial = math.floor((target - counter.cost(header)) / word_cost)
    _, context, ranked, length = _fit_count(build, initial, word_cost, target, counter, tolerance)
    top = ranked[: num_answers + 1]
    if any(top[i][1] <= top[i + 1][1] for i in range(len(top) - 1)):
        raise ValueError(f"target {target} is too small to separate the {num_answers} most frequent words")
    return _Draft(
        question=(
            f"What are the {num_answers} most frequent coded words in the text above? "
            "Give them from most to least frequent."
        ),
        answers=[code for code, _ in ranked[:num_answers]],
        context=context,
        gold=[
            {"kind": "count", "text": code, "count": count, "rank": rank + 1}
            for rank, (code, count) in enumerate(ranked[:num_answers])
        ],
        length=length,
        meta={"alpha": alpha, "top_counts": [count for _, count in ranked[: num_answers + 1]],
              # RULER's prompt asks for the three most frequent words
              **({"answer_prompt": {"name": "ruler:freq_words_extraction"}} if num_answers == 3 else {})},
        uses_filler=False,
    )


# ---------------------------------------------------------------------------
# Hash-Hop
# ---------------------------------------------------------------------------


def hashhop(
    rng: random.Random,
    target: int,
    counter: LengthCounter,
    filler: Filler,
    tolerance: float,
    *,
    hops: int = 2,
    hash_chars: int = 16,
) -> _Draft:
    """Shuffled ``a -> b`` hash links; follow the chain from a start hash ``hops`` times."""
    if not 1 <= hops <= 4:
        raise ValueError(f"hops must be 1-4, got {hops}")
    if not 8 <= hash_chars <= 64:
        raise ValueError(f"hash_chars must be 8-64, got {hash_chars}")
    path = [_random_hash(rng, hash_chars) for _ in range(hops + 1)]
    inserts = [
        _Insert(f"{path[hop]} -> {path[hop + 1]}", rng.random(), {"kind": "link", "hop": hop + 1})
        for hop in range(hops)
    ]
    sample = [f"{_random_hash(rng, hash_chars)} -> {_random_hash(rng, hash_chars)}" for _ in range(32)]
    cheapest = max(1e-9, min(counter.cost(line) for line in sample))
    budget = target - sum(counter.cost(insert.text) for insert in inserts)
    needed = math.ceil(1.5 * max(0.0, budget) / cheapest) + 2 * hops
    lines: list[str] = []
    while len(lines) < needed:  # distractor chains of the same length
        chain = [_random_hash(rng, hash_chars) for _ in range(hops + 1)]
        lines.extend(f"{chain[i]} -> {chain[i + 1]}" for i in range(hops))
    rng.shuffle(lines)
    composed = _compose(rng, lines, "\n", inserts, target, counter, cyclic=False, tolerance=tolerance)
    return _Draft(
        question=(
            f"The text above lists links between hashes, one per line, written 'A -> B'. Start at {path[0]} "
            f"and follow the links {hops} time{'s' if hops > 1 else ''}. Which hash do you reach?"
        ),
        answers=[path[-1]],
        context=composed.context,
        gold=_insert_evidence(inserts, composed.spans),
        length=composed.length,
        task_name=f"{SYNTHETIC_PREFIX}hashhop_{hops}hop",
        meta={"hops": hops, "path": path},
        uses_filler=False,
    )


# ---------------------------------------------------------------------------
# bAbI-style fact tracking (BABILong qa1-qa3)
# ---------------------------------------------------------------------------


@dataclass
class _Story:
    facts: list[str]
    question: str
    answer: str
    supporting: list[int]


@dataclass
class _World:
    """A bAbI-style world as its story unfolds: the facts so far and where everyone and everything is."""

    facts: list[str] = field(default_factory=list)
    person_location: dict[str, str] = field(default_factory=dict)
    last_move: dict[str, int] = field(default_factory=dict)
    holder: dict[str, str | None] = field(default_factory=lambda: dict.fromkeys(OBJECTS))
    object_location: dict[str, str | None] = field(default_factory=lambda: dict.fromkeys(OBJECTS))
    grab_fact: dict[str, int] = field(default_factory=dict)
    drop_support: dict[str, list[int]] = field(default_factory=dict)
    # per object: (place, fact, grab fact)
    history: dict[str, list[tuple[str, int, int]]] = field(default_factory=lambda: {obj: [] for obj in OBJECTS})


def _simulate_story(rng: random.Random, qa: int, num_facts: int) -> _Story | None:
    """One bAbI-style story and a question with one (qa1), two (qa2) or three (qa3) supporting facts."""
    world = _World()
    for _ in range(num_facts):
        _next_fact(rng, qa, world)
    if qa == 1:
        return _where_is_person(rng, world)
    if qa == 2:
        return _where_is_object(rng, world)
    return _where_was_object(rng, world)


def _next_fact(rng: random.Random, qa: int, world: _World) -> None:
    """One more fact: someone grabs or drops an object (qa2, qa3) or moves somewhere."""
    placed = [p for p in PEOPLE if p in world.person_location]
    holder, object_location, facts = world.holder, world.object_location, world.facts
    grabbable = [
        (p, o)
        for p in placed
        for o in OBJECTS
        if holder[o] is None and object_location[o] in (None, world.person_location[p])
    ]
    droppable = [(p, o) for o in OBJECTS if (p := holder[o]) is not None]
    roll = rng.random()
    if qa > 1 and grabbable and roll < 0.3:
        person, obj = rng.choice(grabbable)
        facts.append(f"{person} {rng.choice(_GRAB_VERBS)} the {obj} there.")
        holder[obj] = person
        world.grab_fact[obj] = len(facts) - 1
        if object_location[obj] is None:
            world.history[obj].append((world.person_location[person], world.last_move[person], len(facts) - 1))
        object_location[obj] = world.person_location[person]
    elif qa > 1 and droppable and roll < 0.45:
        person, obj = rng.choice(droppable)
        facts.append(f"{person} {rng.choice(_DROP_VERBS)} the {obj}.")
        holder[obj] = None
        world.drop_support[obj] = [world.last_move[person], len(facts) - 1]
    else:
        person = rng.choice(PEOPLE)
        place = rng.choice([loc for loc in LOCATIONS if loc != world.person_location.get(person)])
        facts.append(f"{person} {rng.choice(_MOVE_VERBS)} the {place}.")
        world.person_location[person] = place
        world.last_move[person] = len(facts) - 1
        for obj in OBJECTS:
            if holder[obj] == person:
                object_location[obj] = place
                world.history[obj].append((place, len(facts) - 1, world.grab_fact[obj]))


def _where_is_person(rng: random.Random, world: _World) -> _Story | None:
    """qa1: where someone who moved is (one supporting fact)."""
    if not world.last_move:
        return None
    person = rng.choice(sorted(world.last_move))
    return _Story(world.facts, f"Where is {person}?", world.person_location[person], [world.last_move[person]])


def _where_is_object(rng: random.Random, world: _World) -> _Story | None:
    """qa2: where an object is (two supporting facts: the grab or drop, and a move)."""
    known = [o for o in OBJECTS if world.object_location[o] is not None]
    if not known:
        return None
    obj = rng.choice(known)
    holder = world.holder[obj]
    if holder is not None:
        support = sorted({world.grab_fact[obj], world.last_move[holder]})
    else:
        support = sorted(set(world.drop_support[obj]))
    return _Story(world.facts, f"Where is the {obj}?", world.object_location[obj], support)


def _where_was_object(rng: random.Random, world: _World) -> _Story | None:
    """qa3: where an object was before its last place (three supporting facts)."""
    candidates = []
    for obj in OBJECTS:
        places = [place for place, _, _ in world.history[obj]]
        if len(places) >= 2 and places.count(places[-1]) == 1:
            candidates.append(obj)
    if not candidates:
        return None
    obj = rng.choice(candidates)
    (before, before_fact, _), (last, last_fact, last_grab) = world.history[obj][-2], world.history[obj][-1]
    return _Story(
        world.facts, f"Where was the {obj} before the {last}?", before, sorted({last_grab, before_fact, last_fact})
    )


def _babilong(qa: int, default_facts: int) -> Callable[..., _Draft]:
    def build(
        rng: random.Random,
        target: int,
        counter: LengthCounter,
        filler: Filler,
        tolerance: float,
        *,
        num_facts: int = default_facts,
    ) -> _Draft:
        if num_facts < 1:
            raise ValueError("num_facts must be >= 1")
        for _ in range(1000):
            story = _simulate_story(rng, qa, num_facts)
            if story is not None:
                break
        else:
            raise ValueError(f"no answerable qa{qa} story with {num_facts} facts; use more facts")
        depths = sorted(rng.random() for _ in story.facts)
        inserts = [
            _Insert(
                fact,
                depth,
                {"kind": "supporting_fact", "fact_index": index} if index in story.supporting else None,
            )
            for index, (fact, depth) in enumerate(zip(story.facts, depths))
        ]
        composed = _compose(
            rng, filler.units, filler.separator, inserts, target, counter, tolerance=tolerance
        )
        return _Draft(
            question=story.question,
            answers=[story.answer],
            context=composed.context,
            gold=_insert_evidence(inserts, composed.spans),
            length=composed.length,
            metric="babilong_answer_correct",
            meta={
                "babilong_task": f"qa{qa}",
                "labels": list(LOCATIONS),
                "story": story.facts,
                "supporting_facts": story.supporting,
                "fact_spans": [[start, end] for start, end in composed.spans],
            },
        )

    build.__name__ = f"babilong_qa{qa}"
    build.__doc__ = {
        1: "bAbI qa1 (single supporting fact): where is a person?",
        2: "bAbI qa2 (two supporting facts): where is an object someone carried or dropped?",
        3: "bAbI qa3 (three supporting facts): where was an object before its current place?",
    }[qa]
    return build


babilong_qa1 = _babilong(1, 10)
babilong_qa2 = _babilong(2, 20)
babilong_qa3 = _babilong(3, 30)


# ---------------------------------------------------------------------------
# Registry and public entry points
# ---------------------------------------------------------------------------

SYNTHETIC_TASKS: dict[str, Callable[..., _Draft]] = {
    "niah_single": niah_single,
    "niah_multikey": niah_multikey,
    "niah_multivalue": niah_multivalue,
    "niah_multiquery": niah_multiquery,
    "variable_tracking": variable_tracking,
    "common_words": common_words,
    "frequent_words": frequent_words,
    "hashhop": hashhop,
    "babilong_qa1": babilong_qa1,
    "babilong_qa2": babilong_qa2,
    "babilong_qa3": babilong_qa3,
}
"""Generator name -> builder; each builder's docstring says what it makes."""


def task_options(task: str) -> dict[str, Any]:
    """The options a task accepts, with their defaults."""
    builder = _builder(task)
    return {
        name: parameter.default
        for name, parameter in inspect.signature(builder).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }


def _builder(task: str) -> Callable[..., _Draft]:
    if task not in SYNTHETIC_TASKS:
        raise ValueError(f"unknown synthetic task {task!r}; choose one of {', '.join(SYNTHETIC_TASKS)}")
    return SYNTHETIC_TASKS[task]


def generate_example(
    task: str,
    target_tokens: int,
    *,
    seed: int = 0,
    index: int = 0,
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    filler: str = "kjv",
    tolerance: float = DEFAULT_TOLERANCE,
    counter: LengthCounter | None = None,
    **options: Any,
) -> EvalExample:
    """Example ``index`` of a generated task at ``target_tokens`` (see the module docstring)."""
    builder = _builder(task)
    accepted = task_options(task)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"task {task!r} has no option {', '.join(unknown)}; its options: {accepted}")
    if not isinstance(target_tokens, int) or target_tokens < 16:
        raise ValueError(f"target_tokens must be an int >= 16, got {target_tokens!r}")
    counter = counter or LengthCounter(tokenizer, tokens_per_word)
    filler_source = get_filler(filler)
    rng = random.Random(f"{task}:{seed}:{index}")
    draft = builder(rng, target_tokens, counter, filler_source, tolerance, **options)
    task_name = draft.task_name or f"{SYNTHETIC_PREFIX}{task}"
    return EvalExample(
        id=f"{task_name}-{target_tokens}-s{seed}-{index}",
        task=task_name,
        question=draft.question,
        answers=draft.answers,
        context=draft.context,
        gold_evidence=draft.gold,
        metric=draft.metric,
        meta={
            "generator": task,
            "options": {**accepted, **options},
            "seed": seed,
            "index": index,
            "filler": filler_source.describe() if draft.uses_filler else None,
            "target_length": target_tokens,
            "length": draft.length,
            "num_words": count_words(draft.context),
            **counter.describe(),
            "proxy_note": PROXY_NOTE,
            **draft.meta,
        },
        proxy=True,
    )


def generate_examples(
    task: str,
    num_examples: int,
    target_tokens: int,
    *,
    seed: int = 0,
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    filler: str = "kjv",
    tolerance: float = DEFAULT_TOLERANCE,
    **options: Any,
) -> list[EvalExample]:
    """``num_examples`` examples (indices 0..n-1) of a generated task at ``target_tokens``."""
    if num_examples < 0:
        raise ValueError(f"num_examples must be >= 0, got {num_examples}")
    counter = LengthCounter(tokenizer, tokens_per_word)
    return [
        generate_example(
            task,
            target_tokens,
            seed=seed,
            index=index,
            filler=filler,
            tolerance=tolerance,
            counter=counter,
            **options,
        )
        for index in range(num_examples)
    ]
