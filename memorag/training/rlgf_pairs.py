"""The third stage's data: preference pairs of clue sets, scored by the answers they lead to.

For each tuning question (HotpotQA dev rows 0..4,999, `hotpotqa_long_context(split="train")`, and the
SQuAD v2 tuning articles; a held-out row or article is refused, `check_tuning`), its long context is
memorized once as one document by a `MemoRAG` over the memory model being trained (in the scoring
pipeline's dtype, `sampling_model`: a copy of it in bfloat16 where the device computes that natively, as
the harness reads and answers there); the memory samples `samples` clue sets (one reply per clue kind
each, `clue_requests`, all decoded as one batch with temperature and top-p, seeded per question); each
set is scored through the pipeline's own memorag mode: its clues are cleaned as the mode cleans them
(`clues_from_replies`), retrieve under the pipeline's evidence rule (`clue_plan`; the reference rule by
default), and the reader answers from that evidence (`Mode.retrieve_and_answer`). The score is

    answer_weight * F1(answer, gold) + recall_weight * gained

with `gained` the share of the question's gold sentences (supporting facts) that the set's evidence
holds and the query's own hits (its `hits_per_query` chunks) miss: what the clues added. Best against
worst is the pair; a pair whose scores differ by less than `margin`, or not at all, is dropped.

Each question's record keeps the token ids the memory wrote (prompts and replies, a reply's stop token
included), the content hash of the memorized context (not its text: `question_contexts` builds it again
from the same rows, seeded per question, and the hash proves it the same), every set's replies, clues,
answer and scores, and the reference's log-probabilities of the chosen and rejected sets (the memory
model as built, in the training's precision, `memorag.training.rlgf_objective.pair_logprobs`) with the
hash of its memory weights, and the dtype the sets were sampled and scored in (`sampler_dtype`). A kept
question's pair (`pair_of`) holds the question's fields and those two sets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from memorag.evaluation import recall as recall_lib
from memorag.evaluation.datasets.hotpotqa import HOTPOTQA_TRAIN_ROWS
from memorag.evaluation.metrics import max_over_references, qa_f1_score
from memorag.evaluation.results_store import append_json_line, read_json_lines
from memorag.modes.evidence_plan import clue_plan, offers_draft
from memorag.modes.memorag import clue_requests, clues_from_replies, draft_from_replies
from memorag.modes.results import AskHooks, memory_text, timed
from memorag.pipeline import MemoRAG
from memorag.prompting.answer_forms import as_answer_form
from memorag.retrieval.chunking import Document
from memorag.runtime.stop_tokens import stop_token_ids

from .config import RLGFSection
from .errors import TrainingInputError
from .rlgf_objective import TokenizedPair, pair_logprobs

MODE = "memorag"
TASK = "memorag"
SHARD_QUESTIONS = 200  # question records a shard holds: about 1.3 MB at 4K-token contexts
QUESTION_FIELDS = ("id", "task", "row", "article", "split", "question", "answers", "context_sha256", "ratio", "kinds",
                   "prompt_ids")


def check_tuning(task: str, meta: dict[str, Any], where: str) -> None:
    """Refuse a question that is not from the tuning rows: HotpotQA rows 5,000 and above, or a SQuAD
    article of the held-out half, only evaluate."""
    if task.startswith("hotpotqa"):
        row = meta.get("row")
        if not isinstance(row, int) or not 0 <= row < HOTPOTQA_TRAIN_ROWS:
            raise TrainingInputError(f"{where}: HotpotQA row {row!r} is not a tuning row (0..{HOTPOTQA_TRAIN_ROWS - 1}); "
                                     "rows from 5,000 on are the evaluation pool and are never trained on")
    elif task.startswith("squad"):
        if meta.get("split") != "train":
            raise TrainingInputError(f"{where}: a SQuAD question of split {meta.get('split')!r}; only the tuning "
                                     "articles (split train) are trained on")
    else:
        raise TrainingInputError(f"{where}: task {task!r} is neither HotpotQA nor SQuAD tuning data")


def question_seed(seed: int, example_id: str) -> int:
    """The sampling seed of one question: the same whatever ran before it (a resumed build matches)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:rlgf:{example_id}".encode()).digest()[:4], "big")


def gained_share(units: recall_lib.GoldUnits, evidence: list[recall_lib.Span], query_hits: list[recall_lib.Span]
                 ) -> float | None:
    """The share of the fine gold units (sentences) found in `evidence` and not in `query_hits`; None without any."""
    if not units.fine:
        return None
    def found(unit, spans):
        return any(recall_lib.region_found(region, spans, unit.whole, 1.0) for region in unit.regions)
    return sum(found(unit, evidence) and not found(unit, query_hits) for unit in units.fine) / len(units.fine)


@dataclasses.dataclass
class PairModels:
    """What every question shares: the memory model that samples and is scored (the one being trained, or its
    copy in the scoring dtype, `sampling_model`), the embedder, the reader, and the reference: the memory model
    as built, whose log-probabilities the trainer starts from (None: the sampling model itself)."""

    memory_model: Any
    embedder: Any
    embedder_name: str
    generator: Any
    reference: Any = None

    def pipeline(self, config) -> MemoRAG:
        return MemoRAG(config, memory_model=self.memory_model, embedder=self.embedder,
                       embedder_name=self.embedder_name, generator=self.generator)


def sample_clue_sets(rag: MemoRAG, query: str, language: str, settings: RLGFSection, seed: int
                     ) -> tuple[dict[str, tuple[str, bool]], list[list[list[int]]]]:
    """The clue requests of `query` and `settings.samples` sampled clue sets over `rag`'s memory: per set,
    per kind, the reply's ids (its stop token appended when it ended on one), all decoded as one batch whose
    matrix products are shared (`exact=False`: a sampled reply is a draw, not a lone decoding to match, and the
    shared products are the faster, docs/training.md)."""
    model = rag.memory_model
    requests = clue_requests(rag.mode(MODE).settings_of(rag.config), query, TASK, language)
    prompts = [prompt for prompt, _ in requests.values()]
    limit = rag.config.clue_max_new_tokens
    replies = model.generate_ids_batch(prompts * settings.samples, rag.memory, max_new_tokens=limit, do_sample=True,
                                       temperature=settings.temperature, top_p=settings.top_p, seed=seed,
                                       exact=False)
    stop = stop_token_ids(model.tokenizer, model.base_model)[:1]
    ended = [ids + stop if len(ids) < limit else ids for ids in replies]
    kinds = len(prompts)
    return requests, [ended[start : start + kinds] for start in range(0, len(ended), kinds)]


def score_clue_set(rag: MemoRAG, example: Any, requests: dict[str, tuple[str, bool]], replies: dict[str, str],
                   query_hits: list[recall_lib.Span], settings: RLGFSection) -> dict[str, Any]:
    """One clue set through the memorag mode (cleaned, retrieved under the evidence rule, answered by the
    reader): its clues, answer, F1, gained gold sentences and score."""
    handler = rag.mode(MODE)
    form = as_answer_form(example.meta.get("answer_prompt", rag.config.answer_prompt))
    context = rag.context(handler, form)
    query = example.question.strip()
    language = context.language_of(query)
    mode_settings = context.settings
    clues = clues_from_replies(requests, replies, query, mode_settings)
    plan = clue_plan(query, clues, mode_settings, context.shared.hits_per_query)
    draft = draft_from_replies(replies, query, language) if offers_draft(mode_settings) else ""
    answer = handler.retrieve_and_answer(context, query, TASK, language, AskHooks(), {}, plan, clues=clues,
                                         raw=replies, draft=draft)
    f1 = max_over_references(qa_f1_score, answer.answer, list(example.answers)) if example.answers else 0.0
    units = recall_lib.gold_units(example.gold_evidence, False)
    evidence = [(item.doc_id, item.start_char, item.end_char) for item in answer.evidence]
    gained = gained_share(units, evidence, query_hits)
    score = settings.answer_weight * f1 + settings.recall_weight * (gained or 0.0)
    return {"clues": clues, "answer": answer.answer, "f1": round(f1, 6), "gained": gained, "score": round(score, 6),
            "evidence_tokens": sum(item.num_tokens for item in answer.evidence)}


def _query_hits(rag: MemoRAG, query: str) -> list[recall_lib.Span]:
    chunks = {chunk.id: chunk for chunk in rag.chunks}
    hits = rag.retrieve([query], k=rag.config.hits_per_query)[0]
    return [(chunks[h.chunk_id].doc_id, chunks[h.chunk_id].start_char, chunks[h.chunk_id].end_char) for h in hits]


def choose_pair(scores: list[float], margin: float) -> tuple[int, int, str | None]:
    """(best, worst, why dropped or None): the first of equal scores wins each side."""
    best = max(range(len(scores)), key=lambda index: (scores[index], -index))
    worst = min(range(len(scores)), key=lambda index: (scores[index], index))
    gap = scores[best] - scores[worst]
    if gap <= 0:
        return best, worst, "tie"
    return best, worst, "margin" if gap < margin else None


def question_record(models: PairModels, pipeline, example: Any, settings: RLGFSection, seed: int) -> dict[str, Any]:
    """Everything one question gives (see the module docstring); `dropped` says why it makes no pair."""
    check_tuning(example.task, example.meta, f"question {example.id}")
    rag, timings = models.pipeline(pipeline), {}
    document = Document(id=recall_lib.CONTEXT_DOC_ID, text=example.context)
    with timed(timings, "memorize"):
        rag.memorize([document], with_memory=True, show_progress=False)
    query = example.question.strip()
    language = rag.context(rag.mode(MODE)).language_of(query)
    with timed(timings, "sample"):
        requests, sets = sample_clue_sets(rag, query, language, settings, question_seed(seed, example.id))
    tokenizer, query_hits = rag.memory_model.tokenizer, _query_hits(rag, query)
    scored = []
    with timed(timings, "score"):
        for ids in sets:
            replies = {kind: tokenizer.decode(reply, skip_special_tokens=True)
                       for kind, reply in zip(requests, ids, strict=True)}
            scored.append({"replies": replies, "reply_ids": ids,
                           **score_clue_set(rag, example, requests, replies, query_hits, settings)})
    best, worst, dropped = choose_pair([item["score"] for item in scored], settings.margin)
    memory, reference = rag.memory, models.reference or rag.memory_model
    record = {"id": example.id, "task": example.task, "row": example.meta.get("row"),
              "article": example.meta.get("article"), "split": example.meta.get("split"),
              "question": query, "answers": list(example.answers), "context_sha256": memory.content_sha256,
              "ratio": memory.ratio, "kinds": list(requests),
              "prompt_ids": [rag.memory_model.prompt_ids(prompt, memory) for prompt, _ in requests.values()],
              "sets": scored, "chosen": best, "rejected": worst, "dropped": dropped,
              "sampler_dtype": str(rag.memory_model.base_dtype).removeprefix("torch.")}
    if dropped is None:
        with timed(timings, "reference"):
            record["reference"] = reference_logps(reference, record, memory_text([document]))
    record["timings"] = {stage: round(seconds, 3) for stage, seconds in timings.items()}
    return record


def reference_logps(model, record: dict[str, Any], context: str) -> dict[str, Any]:
    """The reference's (the memory model as built) log-probabilities of the record's chosen and rejected sets over
    the memory of `context`."""
    from memorag.prompting.chat_layout import context_ids

    ids, _ = context_ids(model.tokenizer, model.layout, context, None)
    pair = TokenizedPair(tuple(ids), *(tuple(tuple(r) for r in rows) for rows in (
        record["prompt_ids"], record["sets"][record["chosen"]]["reply_ids"],
        record["sets"][record["rejected"]]["reply_ids"])), 0.0, 0.0)
    with torch.no_grad():
        chosen, rejected = pair_logprobs(model, pair, record["ratio"], pad_id(model.tokenizer))
    return {"chosen": float(chosen), "rejected": float(rejected), "memory_weights_sha256": model.memory_weights_hash()}


def pad_id(tokenizer) -> int:
    """The id right-padded rows are filled with (never scored)."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0):
        if candidate is not None:
            return int(candidate)
    return 0


def pair_of(record: dict[str, Any]) -> dict[str, Any]:
    """A kept question's preference pair: its question fields, its chosen and rejected sets, the reference."""
    sets = record["sets"]
    return {**{name: record[name] for name in QUESTION_FIELDS}, "chosen": sets[record["chosen"]],
            "rejected": sets[record["rejected"]], "reference": record["reference"]}


def read_records(folder: Path) -> dict[str, dict[str, Any]]:
    """The question records in the shards of `folder` (a torn last line, cut off, is asked again)."""
    done: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("part-*.jsonl")):
        done.update((record["id"], record) for record in read_json_lines(path, repair=True))
    return done


def write_pairs(out: Path, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The kept pairs of `records` by question id, written to `out` atomically; returned. Not in the build's order:
    a build stopped and resumed in other numbers of processes holds its questions in shards of another order, and
    the file is to be the same bytes however it was built (the trainer shuffles the pairs by its seed)."""
    from memorag.storage.io import atomic_write_text

    kept = [pair_of(record) for record in sorted(records, key=lambda record: record["id"]) if record["dropped"] is None]
    atomic_write_text(out, "".join(json.dumps(pair, ensure_ascii=False) + "\n" for pair in kept))
    return kept


def rewrite_pairs(out: Path) -> int:
    """`out` written again from a finished build's `out`.questions: the same bytes the build wrote, without a model.
    Its pairs file may be left out of a repository (it grows past a file-size cap before its shards do) and made
    again here. Returns the number of pairs."""
    questions = out.with_name(out.name + ".questions")
    if not questions.is_dir():
        raise FileNotFoundError(f"{questions} holds no finished build to write {out} from")
    return len(write_pairs(out, read_records(questions).values()))


def build_pairs(models: PairModels, pipeline, examples: Iterable[Any], settings: RLGFSection, out: Path,
                seed: int = 0, on_question: Callable[[dict[str, Any]], None] | None = None,
                autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
                share: tuple[int, int] = (0, 1), before_finish: Callable[[], None] | None = None,
                progress: bool = False) -> dict[str, Any]:
    """Every question's record into the folder `out`.partial (appended and synced one by one, `SHARD_QUESTIONS` a
    shard, so a stopped build goes on where it stopped and no file grows without bound), then the kept pairs into
    `out`, atomically, and the folder becomes `out`.questions (the dropped questions' sets and scores too); the
    counts and times. Each question runs under `autocast` (the training's: bf16 weights beside float32 memory
    parameters need it). `share` (index, count) builds only every count-th question from the index-th, into shards
    of its own (`memorag.training.rlgf_workers` runs the shares in processes side by side); share 0 waits for the
    others (`before_finish`) and finishes the build, the others return their counts."""
    from tqdm.auto import tqdm

    partial = out.with_name(out.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    done = read_records(partial)
    examples, (index, count) = list(examples), share
    mine = examples[index::count]
    todo = [example for example in mine if example.id not in done]
    started, resumed, suffix = time.perf_counter(), len(done), "" if count == 1 else f"-{index}of{count}"
    bar = tqdm(total=len(mine), initial=len(mine) - len(todo), unit="question", disable=not progress,
               desc="clue sets" if count == 1 else f"clue sets, share {index + 1} of {count}", position=index)
    for example in todo:
        tick = time.perf_counter()
        with autocast():
            record = question_record(models, pipeline, example, settings, seed)
        record["build_s"], record["build_shares"] = round(time.perf_counter() - tick, 3), count
        append_json_line(partial / f"part-{len(done) // SHARD_QUESTIONS:05d}{suffix}.jsonl", record)
        done[example.id] = record
        bar.update()
        if on_question is not None:
            on_question(record)
    bar.close()
    if index > 0:
        return {"questions": len(mine), "built_this_run": len(todo)}
    if before_finish is not None:
        before_finish()
    return finish_pairs(out, examples, resumed, started)


def finish_pairs(out: Path, examples: list[Any], resumed: int, started: float) -> dict[str, Any]:
    """The kept pairs of a build whose every question is in `out`.partial written to `out`, the folder renamed
    `out`.questions; the counts and times."""
    partial = out.with_name(out.name + ".partial")
    done = read_records(partial)
    missing = sum(example.id not in done for example in examples)
    if missing:
        raise TrainingInputError(f"{missing} of {len(examples)} questions are not in {partial} yet (a share of the "
                                 "build stopped): run the same command again, it goes on where it stopped")
    records = [done[example.id] for example in examples]
    kept = write_pairs(out, records)
    questions = out.with_name(out.name + ".questions")
    if questions.exists():  # a --rebuild's earlier build
        shutil.rmtree(questions)
    partial.replace(questions)
    return {"questions": len(records), "pairs": len(kept), "resumed_questions": resumed,
            "dropped": dict(Counter(r["dropped"] for r in records if r["dropped"] is not None)),
            "question_s_mean": round(sum(r["build_s"] for r in records) / max(len(records), 1), 3),
            "build_s_this_run": round(time.perf_counter() - started, 1)}


# the harness's CPU settings (configs/eval/cpu-hour.yaml): what the clues are scored under, unless rlgf.pipeline says
HARNESS_PIPELINE = {"device": "cpu", "generator_window": 4096, "answer_max_new_tokens": 32, "evidence_tokens": 1024}


def pipeline_settings(cfg):
    """The `PipelineConfig` that scores the clues: the harness's CPU settings, then `rlgf.pipeline`."""
    from memorag.config import config_from_dict
    from memorag.pipeline.types import PipelineConfig

    return config_from_dict(PipelineConfig, {**HARNESS_PIPELINE, **cfg.rlgf.pipeline})


def sampling_dtype(pipeline, model) -> torch.dtype:
    """The dtype the clue sets are sampled and scored in: `rlgf.pipeline.dtype`; under auto, bfloat16 where the
    device computes it natively (a GPU, or a CPU with AMX or AVX512-BF16: memorag/runtime/cpu_dtype.py), the
    precision the harness reads and answers in there, else the base's own (`model`, as built for training)."""
    from memorag.runtime.cpu_dtype import native_on_cpu

    if pipeline.dtype != "auto":
        return getattr(torch, pipeline.dtype)  # float32, bfloat16 or float16 (PipelineConfig checks the name)
    if model.device.type == "cuda" or (model.device.type == "cpu" and native_on_cpu(torch.bfloat16)):
        return torch.bfloat16
    return model.base_dtype


def sampling_model(cfg, pipeline, model, device=None):
    """The memory model that samples the clue sets and is scored: `model` (as built for training) where it
    computes in `sampling_dtype` already, else a model of the same config loaded in that dtype (its buffers,
    the rotary table among them, as the loader makes them) holding `model`'s parameters, the memory ones
    included, cast to it (a sample is a draw: its precision needs to match no gradient; the reference's
    log-probabilities stay `model`'s, in the training's precision)."""
    from .build import build_model

    dtype = sampling_dtype(pipeline, model)
    if dtype == model.base_dtype:  # float32 memory parameters beside bf16 weights run under the build's autocast
        return model
    name = str(dtype).removeprefix("torch.")
    sampler = build_model(dataclasses.replace(cfg.model, dtype=name), cfg.memory, bf16=dtype != torch.float32,
                          device=device)
    for parameter in sampler.memory_parameters().values():
        parameter.data = parameter.data.to(dtype)
    source = dict(model.named_parameters(remove_duplicate=False))
    with torch.no_grad():
        for key, parameter in sampler.named_parameters(remove_duplicate=False):
            parameter.copy_(source[key].to(dtype))
    sampler.memory_parameters_changed()
    return sampler.requires_grad_(False)


def tuning_questions(cfg, tokenizer) -> list[Any]:
    """`rlgf.hotpotqa` and `rlgf.squad` tuning questions at `rlgf.context_tokens`, in one seeded order; a question
    without a gold answer (SQuAD's unanswerable ones) is left out: no F1 can tell its clue sets apart."""
    from .reader_data import interleave, tuning_examples

    settings = cfg.rlgf
    groups = [tuning_examples(source, count, settings.context_tokens, cfg.seed, tokenizer)
              for source, count in (("hotpotqa", settings.hotpotqa), ("squad", settings.squad)) if count]
    return [example for example in interleave(groups, cfg.seed) if example.answers]


def question_contexts(cfg, tokenizer) -> dict[str, str]:
    """The memorized text of each tuning question of `cfg` (`tuning_questions`), by question id: what a pair's
    `context_sha256` was made from, built again from the same rows (each question's context is seeded by its id)."""
    return {example.id: memory_text([Document(id=recall_lib.CONTEXT_DOC_ID, text=example.context)])
            for example in tuning_questions(cfg, tokenizer)}


def build_from_config(cfg, out: Path | None = None, models: PairModels | None = None,
                      on_question: Callable[[dict[str, Any]], None] | None = None, share: tuple[int, int] = (0, 1),
                      before_finish: Callable[[], None] | None = None) -> dict[str, Any]:
    """The pairs of a stage-rlgf config into `out` (default `data.files[0]`), with OUT.stats.json beside it: the
    memory model of `model.*` and `memory.*` (the weights the stage starts from), scored under `rlgf.pipeline`.
    `share` and `before_finish` as `build_pairs` reads them."""
    from memorag.config import config_to_dict
    from memorag.storage.io import atomic_write_text

    from .build import build_model
    from .trainer import use_bf16

    if cfg.stage != "rlgf":
        raise TrainingInputError(f"this config is for stage {cfg.stage!r}; the pairs are built from a stage rlgf config")
    out = Path(out if out is not None else cfg.data.files[0])
    pipeline, bf16 = pipeline_settings(cfg), use_bf16(cfg.precision)
    device = "cuda" if pipeline.device.startswith("cuda") else None
    if models is None:
        model = build_model(cfg.model, cfg.memory, bf16=bf16, device=device)
        sampler = sampling_model(cfg, pipeline, model, device)
        loader = MemoRAG(pipeline, memory_model=sampler)
        models = PairModels(sampler, loader.embedder, loader.embedder_name, loader.generator,
                            reference=model if sampler is not model else None)
    out.parent.mkdir(parents=True, exist_ok=True)
    examples = tuning_questions(cfg, models.memory_model.tokenizer)
    autocast = (lambda: torch.autocast(device or "cpu", dtype=torch.bfloat16)) if bf16 else contextlib.nullcontext
    stats = build_pairs(models, pipeline, examples, cfg.rlgf, out, cfg.seed, on_question, autocast, share,
                        before_finish, cfg.logging.progress_bar)
    if share[0] > 0:
        return stats
    stats.update({"shares": share[1], "rlgf": config_to_dict(cfg.rlgf), "pipeline": config_to_dict(pipeline), "seed": cfg.seed,
                  "model": config_to_dict(cfg.model), "memory": config_to_dict(cfg.memory),
                  "reference_memory_weights_sha256": models.memory_model.memory_weights_hash()})
    atomic_write_text(out.with_name(out.name + ".stats.json"), json.dumps(stats, indent=1) + "\n")
    return stats
