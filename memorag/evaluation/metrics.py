"""Answer-scoring metrics that reproduce the published benchmark scorers.

Every function here re-implements one original scorer so that our numbers can
be put next to the numbers those benchmarks report. Where an original has an
odd corner (an empty answer matching everything, a list mutated while being
iterated, a split that can never fire), the corner is kept and its docstring
says so: changing it would change the score.

Conventions
-----------
* Per-example functions return a float in ``[0, 1]``, exactly as the originals
  do (LongBench, InfiniteBench, LongRAG, LOFT all score one example in [0, 1]).
  The two yes/no checks, :func:`has_answer` and :func:`babilong_answer_correct`,
  return ``bool`` (sum or average them as 0/1).
* Aggregates are stated explicitly: :func:`mean_percent` and
  :func:`longbench_scorer` give ``round(100 * mean, 2)`` like LongBench's
  ``eval.py``; RULER's :func:`string_match_all` / :func:`string_match_part`
  work on a whole task and already return a percentage rounded to 2 places,
  because that is how RULER defines them.
* Predictions and references are plain ``str``. Functions that take several
  gold answers accept a single ``str`` as a one-element list.

Sections
--------
1. SQuAD-style normalisation (LongBench, LongRAG, LOFT variants)
2. LongBench: token F1, ROUGE-L, classification / retrieval / count / code
3. InfiniteBench: ROUGE-Lsum for En.Sum
4. LongRAG: exact match and DPR-tokenizer ``has_answer``
5. LOFT: recall@k, mrecall@k, subspan EM, multi-answer EM (Hungarian)
6. RULER: string_match_all / string_match_part
7. BABILong: answer is correct iff it is the only task label mentioned
8. Aggregation helpers
"""

from __future__ import annotations

import difflib
import functools
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import regex
from rouge import Rouge
from rouge_score import rouge_scorer
from scipy.optimize import linear_sum_assignment

__all__ = [
    "BABILONG_TASK_LABELS",
    "LONGBENCH_EN_METRICS",
    "LONGBENCH_FIRST_LINE_DATASETS",
    "babilong_answer_correct",
    "classification_score",
    "code_sim_score",
    "count_score",
    "dpr_tokenize",
    "exact_match",
    "has_answer",
    "loft_normalize_answer",
    "longbench_dataset_score",
    "longbench_scorer",
    "longrag_normalize_answer",
    "max_over_references",
    "mean_percent",
    "mrecall_at_k",
    "multi_answer_coverage",
    "multi_answer_em",
    "multi_answer_set_em",
    "normalize_answer",
    "qa_f1_score",
    "recall_at_k",
    "retrieval_score",
    "rouge_lsum",
    "rouge_score",
    "ruler_postprocess_pred",
    "string_match_all",
    "string_match_part",
    "subspan_em",
]


def _as_list(answers: str | Sequence[str]) -> list[str]:
    """Treat a bare string as one answer rather than a sequence of characters."""
    return [answers] if isinstance(answers, str) else list(answers)


# ---------------------------------------------------------------------------
# 1. SQuAD-style normalisation
# ---------------------------------------------------------------------------

_PUNCTUATION = frozenset(string.punctuation)  # ASCII punctuation only
# Python's `re` and the third-party `regex` module disagree on what a word
# character is (combining marks, superscript digits), so `\b` around the
# articles can differ. LongBench and LOFT use `re`; LongRAG uses `regex`.
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_ARTICLES_REGEX = regex.compile(r"\b(a|an|the)\b")


def _squad_normalize(text: str, *, nfd: bool, articles: re.Pattern[str] | regex.Pattern[str]) -> str:
    if nfd:
        text = unicodedata.normalize("NFD", text)
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = articles.sub(" ", text)
    return " ".join(text.split())


def normalize_answer(s: str) -> str:
    """LongBench / SQuAD normalisation (also InfiniteBench's).

    Lower-case, delete ASCII punctuation (``string.punctuation``), replace the
    whole words ``a``/``an``/``the`` by a space, then collapse whitespace. No
    Unicode normalisation: accented letters are kept as they are, and non-ASCII
    punctuation (e.g. curly quotes, CJK full stops) is not removed.
    """
    return _squad_normalize(s, nfd=False, articles=_ARTICLES_RE)


def longrag_normalize_answer(s: str) -> str:
    """LongRAG's normalisation (``utils/eval_util.py``).

    As :func:`normalize_answer`, but the text is first put in Unicode NFD form
    (so ``"é"`` becomes ``"e"`` + combining accent, which survives) and the
    article regex runs under the ``regex`` module, where a combining mark counts
    as part of a word.
    """
    return _squad_normalize(s, nfd=True, articles=_ARTICLES_REGEX)


def loft_normalize_answer(s: str) -> str:
    """LOFT's normalisation (``evaluation/utils.py``): NFD, then SQuAD steps with ``re``."""
    return _squad_normalize(s, nfd=True, articles=_ARTICLES_RE)


# ---------------------------------------------------------------------------
# 2. LongBench (THUDM/LongBench metrics.py and eval.py)
# ---------------------------------------------------------------------------


def _token_f1(prediction_tokens: Sequence[str], reference_tokens: Sequence[str]) -> float:
    """Bag-of-tokens F1 with multiset overlap; 0.0 whenever nothing overlaps."""
    overlap = sum((Counter(prediction_tokens) & Counter(reference_tokens)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def qa_f1_score(prediction: str, ground_truth: str) -> float:
    """LongBench ``qa_f1_score``: token F1 after :func:`normalize_answer`.

    Tokens are the whitespace-split normalised strings; the overlap is a
    multiset intersection. Unlike the official SQuAD script, two empty answers
    score 0.0 (not 1.0): LongBench returns 0 whenever the overlap is empty.
    """
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def max_over_references(
    metric: Callable[..., float],
    prediction: str,
    references: str | Sequence[str],
    **metric_kwargs: object,
) -> float:
    """Best score of ``prediction`` against any reference, as LongBench's scorer does.

    Starts from 0.0, so an empty reference list scores 0.0. ``metric_kwargs``
    (e.g. ``all_classes`` for :func:`classification_score`) go to every call.
    """
    best = 0.0
    for reference in _as_list(references):
        best = max(best, metric(prediction, reference, **metric_kwargs))
    return best


def rouge_score(prediction: str, ground_truth: str) -> float:
    """LongBench ``rouge_score``: ROUGE-L F from the ``rouge`` package (pltrdy).

    That package splits each text into sentences on ``"."``, splits words on
    single spaces, counts *distinct* words (set semantics: ``"the the"`` is one
    word), uses the summary-level union LCS, and computes
    ``F = 2PR / (P + R + 1e-8)``. It is case sensitive and keeps punctuation
    other than ``"."`` attached to words. Any exception (empty or all-period
    text, recursion limits on very long sentences) yields 0.0, as in LongBench.
    """
    try:
        scores = Rouge().get_scores([prediction], [ground_truth], avg=True)
    except Exception:  # noqa: BLE001 - LongBench scores 0 on any failure (bare except)
        return 0.0
    return float(scores["rouge-l"]["f"])


def classification_score(prediction: str, ground_truth: str, all_classes: Sequence[str]) -> float:
    """LongBench ``classification_score`` (TREC, LSHT).

    Collect every class name that occurs as a substring of the prediction, then
    drop matched names that are proper substrings of the ground truth. Score is
    ``1 / len(matches)`` if the ground truth is among the matches, else 0.0.

    Kept quirks: the dropping loop removes items from the list it iterates over,
    so the element right after a removed one is skipped (not re-examined); and
    the original's fuzzy ``difflib`` fallback is unreachable (its guard compares
    a list with 0, always true), so it is omitted here.
    """
    matches = [name for name in all_classes if name in prediction]
    position = 0
    while position < len(matches):  # mirrors for-loop-with-remove index advancement
        name = matches[position]
        if name in ground_truth and name != ground_truth:
            matches.remove(name)
        position += 1
    if ground_truth in matches:
        return 1.0 / len(matches)
    return 0.0


def _fraction_of_numbers_equal(prediction: str, target: str) -> float:
    numbers = re.findall(r"\d+", prediction)
    if not numbers:
        return 0.0
    return sum(number == target for number in numbers) / len(numbers)


def retrieval_score(prediction: str, ground_truth: str) -> float:
    """LongBench ``retrieval_score`` (PassageRetrieval-en).

    The gold id is the first ``Paragraph N`` in the ground truth; the score is
    the fraction of digit runs in the prediction that equal ``N`` (string
    equality, so ``"03"`` does not match ``"3"``). No digits: 0.0.
    """
    found = re.findall(r"Paragraph (\d+)", ground_truth)
    if not found:
        raise ValueError(f"ground truth has no 'Paragraph N': {ground_truth!r}")
    return _fraction_of_numbers_equal(prediction, found[0])


def count_score(prediction: str, ground_truth: str | int) -> float:
    """LongBench ``count_score`` (PassageCount): fraction of digit runs equal to the answer."""
    return _fraction_of_numbers_equal(prediction, str(ground_truth))


def code_sim_score(prediction: str, ground_truth: str) -> float:
    """LongBench ``code_sim_score`` (LCC, RepoBench-P).

    Takes the first line of the prediction (after leading newlines) that has
    no backtick, ``#`` or ``//``; empty if none. Then ``fuzz.ratio / 100`` from
    ``fuzzywuzzy`` in its pure-Python form: 100 if the strings are equal, 0 if
    either is empty, else ``round(100 * difflib.SequenceMatcher.ratio())``
    (Python's half-to-even rounding). An install of fuzzywuzzy backed by
    ``python-Levenshtein`` uses a different ratio and can differ slightly.
    """
    candidate = ""
    for line in prediction.lstrip("\n").split("\n"):
        if "`" not in line and "#" not in line and "//" not in line:
            candidate = line
            break
    if candidate == ground_truth:
        return 1.0
    if not candidate or not ground_truth:
        return 0.0
    return round(100 * difflib.SequenceMatcher(None, candidate, ground_truth).ratio()) / 100


LONGBENCH_EN_METRICS: Mapping[str, Callable[..., float]] = {
    "narrativeqa": qa_f1_score,
    "qasper": qa_f1_score,
    "multifieldqa_en": qa_f1_score,
    "hotpotqa": qa_f1_score,
    "2wikimqa": qa_f1_score,
    "musique": qa_f1_score,
    "gov_report": rouge_score,
    "qmsum": rouge_score,
    "multi_news": rouge_score,
    "trec": classification_score,
    "triviaqa": qa_f1_score,
    "samsum": rouge_score,
    "passage_retrieval_en": retrieval_score,
    "passage_count": count_score,
    "lcc": code_sim_score,
    "repobench-p": code_sim_score,
}
"""LongBench's English dataset -> metric table (the Chinese sets need jieba)."""

LONGBENCH_FIRST_LINE_DATASETS = frozenset({"trec", "triviaqa", "samsum", "lsht"})
"""Datasets whose predictions LongBench cuts to the first line before scoring."""


def longbench_scorer(
    metric: Callable[..., float],
    predictions: Sequence[str],
    answers: Sequence[Sequence[str]],
    *,
    first_line_only: bool = False,
    **metric_kwargs: object,
) -> float:
    """LongBench ``scorer``: mean over examples of the max over references, x100, 2 d.p.

    With ``first_line_only`` each prediction is first cut to
    ``prediction.lstrip("\\n").split("\\n")[0]`` (LongBench does this for
    TREC, TriviaQA, SAMSum and LSHT).
    """
    if len(predictions) != len(answers):
        raise ValueError(f"{len(predictions)} predictions but {len(answers)} answer lists")
    scores = []
    for prediction, references in zip(predictions, answers):
        if first_line_only:
            prediction = prediction.lstrip("\n").split("\n")[0]
        scores.append(max_over_references(metric, prediction, references, **metric_kwargs))
    return mean_percent(scores)


def longbench_dataset_score(
    dataset: str,
    predictions: Sequence[str],
    answers: Sequence[Sequence[str]],
    all_classes: Sequence[str] | None = None,
) -> float:
    """Score one English LongBench dataset by name, with LongBench's metric and line rule."""
    if dataset not in LONGBENCH_EN_METRICS:
        raise KeyError(f"no metric for LongBench dataset {dataset!r}")
    metric = LONGBENCH_EN_METRICS[dataset]
    kwargs: dict[str, object] = {}
    if metric is classification_score:
        if all_classes is None:
            raise ValueError(f"{dataset} needs all_classes")
        kwargs["all_classes"] = all_classes
    return longbench_scorer(
        metric,
        predictions,
        answers,
        first_line_only=dataset in LONGBENCH_FIRST_LINE_DATASETS,
        **kwargs,
    )


# ---------------------------------------------------------------------------
# 3. InfiniteBench En.Sum (OpenBMB/InfiniteBench src/compute_scores.py)
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _rouge_lsum_scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=False)


def rouge_lsum(prediction: str, ground_truth: str | Sequence[str]) -> float:
    """ROUGE-Lsum F-measure as InfiniteBench scores ``longbook_sum_eng``.

    InfiniteBench calls ``evaluate.load("rouge").compute(predictions=[pred],
    references=[label], use_aggregator=False)["rougeLsum"][0]``. That metric
    uses ``rouge_score`` with its defaults, reproduced here directly:

    * ``use_stemmer=False``; the default tokenizer lower-cases and keeps only
      ``[a-z0-9]`` runs (non-Latin text contributes no tokens);
    * sentences are split on ``"\\n"`` only; no sentence splitter and no
      newline insertion, so a one-line summary scores exactly like ROUGE-L;
    * the F-measure is returned (not precision or recall);
    * InfiniteBench labels are lists of reference summaries; with a list the
      best F-measure over references is taken (``score_multi``).
    """
    scorer = _rouge_lsum_scorer()
    if isinstance(ground_truth, str):
        return float(scorer.score(ground_truth, prediction)["rougeLsum"].fmeasure)
    references = list(ground_truth)
    if not references:
        raise ValueError("rouge_lsum needs at least one reference")
    return float(scorer.score_multi(references, prediction)["rougeLsum"].fmeasure)


# ---------------------------------------------------------------------------
# 4. LongRAG (TIGER-AI-Lab/LongRAG utils/eval_util.py), DPR tokenizer rules
# ---------------------------------------------------------------------------

# DPR's SimpleTokenizer: a run of letters / numbers / combining marks, or any
# single character that is neither a separator (Z*) nor "other" (C*: controls,
# format, unassigned...). Whitespace is skipped; each punctuation mark is its
# own token.
_DPR_TOKEN = regex.compile(r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]", regex.IGNORECASE | regex.UNICODE)


def dpr_tokenize(text: str) -> list[str]:
    """Uncased DPR ``SimpleTokenizer`` tokens of the NFD-normalised text."""
    text = unicodedata.normalize("NFD", text)
    return [match.group().lower() for match in _DPR_TOKEN.finditer(text)]


def exact_match(prediction: str, ground_truths: str | Sequence[str]) -> float:
    """LongRAG ``single_ans_em``: 1.0 if the normalised prediction equals any normalised gold.

    Uses :func:`longrag_normalize_answer` (NFD, then SQuAD normalisation).
    """
    golds = _as_list(ground_truths)
    if not golds:
        raise ValueError("exact_match needs at least one gold answer")
    normalized_prediction = longrag_normalize_answer(prediction)
    return float(any(longrag_normalize_answer(gold) == normalized_prediction for gold in golds))


def has_answer(answers: str | Sequence[str], text: str) -> bool:
    """LongRAG ``has_correct_answer`` (DPR ``has_answer``): does a gold answer occur in ``text``?

    Both sides go through :func:`dpr_tokenize`; an answer is present when its
    token list occurs as a contiguous run in the text's tokens. No SQuAD
    normalisation: punctuation is kept as tokens and articles matter, so
    ``"U.S."`` does not match ``"US"``. Kept quirk: an answer with no tokens
    (empty or whitespace) matches every text, including an empty one.
    """
    text_tokens = dpr_tokenize(text)
    for answer in _as_list(answers):
        answer_tokens = dpr_tokenize(answer)
        width = len(answer_tokens)
        for start in range(len(text_tokens) - width + 1):
            if text_tokens[start : start + width] == answer_tokens:
                return True
    return False


# ---------------------------------------------------------------------------
# 5. LOFT (google-deepmind/loft evaluation/retrieval.py, rag.py, utils.py)
# ---------------------------------------------------------------------------


def _passage_ids(ids: Iterable[object]) -> list[str]:
    """LOFT compares passage ids as stripped strings."""
    return [str(passage_id).strip() for passage_id in ids]


def _hits_in_top_k(retrieved_ids: Sequence[object], gold_ids: Sequence[object], k: int) -> tuple[int, int]:
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    top_k = set(_passage_ids(retrieved_ids[:k]))
    golds = _passage_ids(gold_ids)
    return len(top_k.intersection(golds)), len(golds)


def recall_at_k(
    retrieved_ids: Sequence[object], gold_ids: Sequence[object], k: int, *, capped: bool = False
) -> float:
    """LOFT ``compute_recall_at_k``: distinct gold ids among the first ``k`` retrieved, / #gold.

    The first ``k`` positions are taken as they are, so duplicates in the
    ranking use up positions but count once. The denominator is ``len(gold_ids)``
    as given (duplicates included). No retrieved ids: 0.0. With ``capped`` and
    more gold ids than ``k``, the denominator is ``k`` instead (LOFT's
    ``capped_recall@k``).
    """
    if len(retrieved_ids) == 0:
        return 0.0
    hits, num_gold = _hits_in_top_k(retrieved_ids, gold_ids, k)
    if num_gold == 0:
        raise ValueError("recall_at_k needs at least one gold id")
    if capped and num_gold > k:
        return hits / k
    return hits / num_gold


def mrecall_at_k(retrieved_ids: Sequence[object], gold_ids: Sequence[object], k: int) -> float:
    """LOFT ``compute_mrecall_at_k`` (Min et al., 2021): all-or-nothing recall.

    1.0 iff the number of distinct gold ids in the first ``k`` retrieved equals
    ``min(k, len(gold_ids))``: every gold id when there are at most ``k`` of
    them, otherwise any ``k`` of them (the top k must be all gold). No
    retrieved ids: 0.0. Kept quirk: an empty gold list gives 1.0 whenever
    something was retrieved.
    """
    if len(retrieved_ids) == 0:
        return 0.0
    hits, num_gold = _hits_in_top_k(retrieved_ids, gold_ids, k)
    return float(hits == min(k, num_gold))


def subspan_em(prediction: str, gold_answers: str | Sequence[str]) -> float:
    """LOFT single-answer ``subspan_em``: some normalised gold is a substring of the normalised prediction.

    Normalisation is :func:`loft_normalize_answer`. The test is a character
    substring test, not a token one (``"cat"`` is found in ``"concatenate"``);
    a gold that normalises to ``""`` is found in anything.
    """
    golds = _as_list(gold_answers)
    if not golds:
        raise ValueError("subspan_em needs at least one gold answer")
    normalized_prediction = loft_normalize_answer(prediction)
    return float(any(loft_normalize_answer(gold) in normalized_prediction for gold in golds))


def multi_answer_em(predictions: Sequence[str], golds: Sequence[str]) -> float:
    """LOFT multi-value ``subspan_em`` (``compute_multi_value_subspan_em``, from DROP).

    After :func:`loft_normalize_answer`, gold ``g`` and prediction ``p`` agree
    when ``g in p or p in g``. Golds and predictions are matched one-to-one by
    a maximum-weight assignment (Hungarian, ``linear_sum_assignment``); the
    score is 1.0 iff every gold is matched to an agreeing prediction. This is
    the score LOFT reports as subspan EM for multi-answer RAG tasks. No
    predictions: 0.0. Kept quirks: a prediction that normalises to ``""``
    (e.g. ``"the"``) agrees with every gold; an empty gold list gives 1.0.
    """
    if not predictions:
        return 0.0
    gold_norm = [loft_normalize_answer(gold) for gold in golds]
    pred_norm = [loft_normalize_answer(str(prediction)) for prediction in predictions]
    agree = np.zeros((len(gold_norm), len(pred_norm)))  # [G, P]
    for gold_index, gold in enumerate(gold_norm):
        for pred_index, pred in enumerate(pred_norm):
            if gold in pred or pred in gold:
                agree[gold_index, pred_index] = 1.0
    rows, cols = linear_sum_assignment(-agree)
    matched = np.zeros(len(gold_norm))  # [G]; golds left unassigned stay 0
    matched[rows] = agree[rows, cols]
    return float(all(matched))


def multi_answer_set_em(predictions: Sequence[str], golds: Sequence[str]) -> float:
    """LOFT multi-value ``em``: the normalised answer sets are equal. No predictions: 0.0."""
    if not predictions:
        return 0.0
    pred_set = {loft_normalize_answer(str(prediction)) for prediction in predictions}
    return float(pred_set == {loft_normalize_answer(gold) for gold in golds})


def multi_answer_coverage(predictions: Sequence[str], golds: Sequence[str]) -> float:
    """LOFT multi-value ``coverage``: |distinct predicted ∩ distinct gold| / len(golds), normalised."""
    if not golds:
        raise ValueError("multi_answer_coverage needs at least one gold answer")
    pred_set = {loft_normalize_answer(str(prediction)) for prediction in predictions}
    gold_set = {loft_normalize_answer(gold) for gold in golds}
    return len(pred_set & gold_set) / len(golds)


# ---------------------------------------------------------------------------
# 6. RULER (NVIDIA/RULER scripts/eval/synthetic/constants.py, evaluate.py)
# ---------------------------------------------------------------------------


def ruler_postprocess_pred(prediction: str) -> str:
    """RULER ``postprocess_pred``: strip, turn control characters ``\\x00-\\x1f`` into ``\\n``, strip.

    RULER's ``evaluate.py`` applies this to every prediction before the metric;
    the two metric functions below do not apply it themselves.
    """
    return re.sub(r"[\x00-\x1f]", "\n", prediction.strip()).strip()


def _check_ruler_inputs(preds: Sequence[str], refs: Sequence[Sequence[str]]) -> None:
    if not preds:
        raise ValueError("RULER metrics need at least one prediction")
    if len(preds) != len(refs):
        raise ValueError(f"{len(preds)} predictions but {len(refs)} reference lists")
    if any(isinstance(ref, str) for ref in refs):
        raise TypeError("each element of refs must be a list of reference strings, not a str")


def string_match_all(preds: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """RULER ``string_match_all`` (NIAH, VT, CWE, FWE), over a whole task.

    Per example: the fraction of its references found (case-insensitive
    substring) in the prediction. Result: mean of those fractions x 100,
    rounded to 2 decimals.
    """
    _check_ruler_inputs(preds, refs)
    total = 0.0
    for pred, ref in zip(preds, refs):
        pred_lower = pred.lower()
        total += sum(1.0 for r in ref if r.lower() in pred_lower) / len(ref)
    return round(total / len(preds) * 100, 2)


def string_match_part(preds: Sequence[str], refs: Sequence[Sequence[str]]) -> float:
    """RULER ``string_match_part`` (QA), over a whole task.

    Per example: 1 if any reference is a case-insensitive substring of the
    prediction, else 0. Result: mean x 100, rounded to 2 decimals.
    """
    _check_ruler_inputs(preds, refs)
    total = 0.0
    for pred, ref in zip(preds, refs):
        pred_lower = pred.lower()
        total += max(1.0 if r.lower() in pred_lower else 0.0 for r in ref)
    return round(total / len(preds) * 100, 2)


# ---------------------------------------------------------------------------
# 7. BABILong (booydar/babilong babilong/metrics.py)
# ---------------------------------------------------------------------------

_LOCATIONS = ("bathroom", "bedroom", "garden", "hallway", "kitchen", "office")
_YES_NO = ("no", "yes")

BABILONG_TASK_LABELS: Mapping[str, tuple[str, ...]] = {
    "qa1": _LOCATIONS,
    "qa2": _LOCATIONS,
    "qa3": _LOCATIONS,
    "qa4": _LOCATIONS,
    "qa5": ("Bill", "Fred", "Jeff", "Mary", "apple", "football", "milk"),
    "qa6": _YES_NO,
    "qa7": ("none", "one", "three", "two"),
    "qa8": ("apple", "football", "milk", "nothing"),
    "qa9": _YES_NO,
    "qa10": ("maybe", "no", "yes"),
    "qa11": _LOCATIONS,
    "qa12": _LOCATIONS,
    "qa13": _LOCATIONS,
    "qa14": ("bedroom", "cinema", "kitchen", "office", "park", "school"),
    "qa15": ("cat", "mouse", "sheep", "wolf"),
    "qa16": ("gray", "green", "white", "yellow"),
    "qa17": _YES_NO,
    "qa18": _YES_NO,
    "qa19": ("e,e", "e,n", "e,s", "n,e", "n,n", "n,w", "s,e", "s,s", "s,w", "w,n", "w,s", "w,w"),
    "qa20": ("bedroom", "bored", "garden", "hungry", "kitchen", "thirsty", "tired"),
}
"""BABILong's answer label set per task (its ``TASK_LABELS``)."""


def _babilong_first_sentence(output: str) -> str:
    output = output.lower().split(".")[0]
    output = output.split("<context>")[0]
    output = output.split("<example>")[0]
    # BABILong also splits on "Question", but only after lower-casing, so that
    # split never fires; it is therefore left out here.
    return output


def babilong_answer_correct(
    output: str,
    target: str,
    *,
    question: str = "",
    task: str | None = None,
    task_labels: Iterable[str] | None = None,
) -> bool:
    """BABILong ``compare_answers``: correct iff the target is the only task label the answer names.

    Steps, as in BABILong: lower-case the output and keep the text before the
    first ``"."``, ``"<context>"`` and ``"<example>"``; find every task label
    that is a *substring* of it; discard labels that also occur in the
    question (they are never the answer). A target with a comma and more than
    3 characters (qa8's ``"apple,milk"``) is a set: correct iff every part is
    found and nothing else is. Otherwise correct iff the found labels are
    exactly ``{target}``.

    Pass the task name (``"qa1"`` .. ``"qa20"``) or the label set directly.
    Substring matching is kept, with its consequences: in qa7 the label
    ``"one"`` is inside ``"none"``, so the answer ``"none"`` is never correct
    unless ``"one"`` is in the question; ``"no"`` is found inside ``"not"``.
    """
    if task_labels is None:
        if task is None:
            raise ValueError("give either task or task_labels")
        task_labels = BABILONG_TASK_LABELS[task]
    labels = {label.lower() for label in task_labels}
    answer = _babilong_first_sentence(output)
    target = target.lower()
    question = question.lower()

    in_question = {label for label in labels if label in question}
    named = {label for label in labels if label in answer} - in_question

    if "," in target and len(target) > 3:
        parts = target.split(",")
        return all(part in named for part in parts) and len(named) == len(parts)
    return target in named and len(named) == 1


# ---------------------------------------------------------------------------
# 8. Aggregation
# ---------------------------------------------------------------------------


def mean_percent(scores: Sequence[float], ndigits: int = 2) -> float:
    """Mean of per-example scores in [0, 1], as a percentage rounded like LongBench (2 d.p.)."""
    if not scores:
        raise ValueError("mean_percent needs at least one score")
    return round(100 * sum(scores) / len(scores), ndigits)
