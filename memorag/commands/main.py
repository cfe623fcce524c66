"""The `memorag` command: memorize texts, ask questions, print clues.

    memorag memorize book.txt [report.pdf notes/ ...] --out book.memorag
    memorag ask book.memorag "Who raised Esther?"
    memorag ask report.pdf "What did the audit find?"
    memorag ask --context book.txt "Who raised Esther?" --mode rag
    memorag clues book.memorag "Who raised Esther?"
    memorag serve --host 127.0.0.1 --port 8000 --store corpora/

With no model options every command runs offline on the embedded models, on a CUDA GPU when
torch sees one, else on the CPU (--device, --dtype, --load-in-4bit/8bit and --threads choose). The answer
is streamed to stdout as it is written; clues, evidence and timings go to stderr
(`--quiet` drops them), and `--json` prints one JSON object instead. An empty answer, one
that only says the question again, or a refusal (`memorag.prompting.answer_check`) is never printed as an answer: stdout
gets nothing and stderr says "no answer: ...", the evidence still shown (`--json`: `"answered":
false` and `"no_answer"`, the reason). Exit status: 0 on
success, 2 for bad input or usage, 1 for any other failure; nothing is left
half-written either way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from memorag.documents.command_options import (
    add_document_options,
    cache_key,
    cache_root,
    print_problem,
    read_documents,
    read_options,
)
from memorag.errors import CliInputError, is_usage_error
from memorag.prompting.answer_check import describe_no_answer
from memorag.runtime.embedded import memory_weights_are_untrained
from memorag.runtime.placement import add_placement_arguments, placement_settings

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


# ----------------------------------------------------------------------------------------------
# arguments


UNTRAINED_RATIO = 4  # MemoryConfig's default ratio, named here so that `--help` does not import torch (a test checks)


def _shipped_memory_shape() -> tuple[int, int]:
    """The window and ratio the shipped memory weights memorize at, read from their config."""
    from memorag.runtime.embedded import SHIPPED_MEMORY_DIR

    settings = json.loads((SHIPPED_MEMORY_DIR / "memory_config.json").read_text(encoding="utf-8"))["memory_config"]
    return settings["window"], settings["ratios"][0]


def _model_options(parser: argparse.ArgumentParser, memorizing: bool, json_output: bool = True) -> None:
    models = parser.add_argument_group("models (default: the embedded models, offline)")
    models.add_argument("--memory-model", metavar="NAME", help="memory model: a hub id or a local folder")
    models.add_argument("--memory-weights", metavar="WEIGHTS",
                        help="trained memory weights: a folder, a hub id (owner/name[@revision]), or a name: 'auto' "
                             "(default): the weights shipped for the embedded model, untrained copies for another "
                             "base (a released memory model carries its own); 'embedded': the shipped weights; "
                             "'untrained': copies of the base model's projections (clues and answers from memory "
                             "are then poor)")
    models.add_argument("--embedder", metavar="NAME", help="sentence-transformers embedder: a hub id or a folder")
    models.add_argument("--retriever", choices=("dense", "bm25", "hybrid"), help="retriever (default: dense)")
    models.add_argument("--generator", metavar="SPEC",
                        help="answer writer: a local model (hub id or folder) or an OpenAI-compatible endpoint "
                             "(http://host:port/v1); default: over the embedded memory model 'embedded', over any "
                             "other the memory model's own base model, sharing its weights; 'embedded': the embedded "
                             "model with the reader adapter trained for it; 'embedded-base': the embedded model as "
                             "it comes; 'memory': the memory model's base model")
    models.add_argument("--generator-model", metavar="NAME", help="the model's name at the endpoint")
    models.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the endpoint's API key "
                                                             "(default: OPENAI_API_KEY)")
    models.add_argument("--timeout", type=float, metavar="S", help="seconds to wait for the endpoint (default: 120)")
    models.add_argument("--retries", type=int, metavar="N", help="retries when the endpoint fails (default: 3)")
    shape = parser.add_argument_group("memorizing" if memorizing else "memorizing (with --context)")
    window, ratio = _shipped_memory_shape()
    shape.add_argument("--ratio", type=int, metavar="R",
                       help=f"memory compression ratio: one memory entry per R tokens read (default: the ratio the "
                            f"memory weights were saved with: {ratio} for the shipped weights, window {window}; "
                            f"{UNTRAINED_RATIO} for untrained ones). A text may be about (positions - "
                            f"window) x R tokens long; `memorag memorize` prints the reach")
    shape.add_argument("--chunk-tokens", type=int, metavar="N", help="tokens per retrieval chunk (default: 160)")
    shape.add_argument("--overlap-tokens", type=int, metavar="N", help="tokens shared by neighbouring chunks (default: 24)")
    shape.add_argument("--encoding", default="auto",
                       help="encoding of text, Markdown and HTML files (default: auto, detected)")
    add_placement_arguments(parser)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any pipeline setting, e.g. --set evidence_tokens=1024, or a mode's: --set longrag.units=2 "
                             "(repeatable)")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print one JSON object (for scripts)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress or details on stderr")


def _ask_options(parser: argparse.ArgumentParser, clues_only: bool) -> None:
    parser.add_argument("target", nargs="*", metavar="DIR QUERY",
                        help="a folder written by `memorag memorize` and the query; or a document (or a folder of "
                             "them) and the query: memorized once, then answered from a cache; or only the query "
                             "with --context")
    parser.add_argument("--context", nargs="+", metavar="FILE",
                        help="memorize these documents (files or folders) now instead of DIR, without caching")
    if clues_only:
        parser.add_argument("--task", choices=("memorag", "summarize"),
                            help="memorag (default): the clues that drive retrieval for a question; summarize: the "
                                 "key points of the context")
    else:
        parser.add_argument("--task", choices=("qa", "memorag", "summarize", "retrieval"),
                            help="memorag: clues from memory drive retrieval; qa: answer the question (the memory "
                                 "model alone in the memorag mode); summarize: key points from memory drive "
                                 "retrieval; retrieval: name the documents that answer (cic) (default: the mode's own)")
    if not clues_only:
        parser.add_argument("--mode", metavar="MODE", help="memorag (default), rag, ... (see `memorag modes`)")
        parser.add_argument("--max-new-tokens", type=int, metavar="N", help="longest answer, in tokens")
        parser.add_argument("--evidence-tokens", type=int, metavar="N", help="most evidence tokens for the generator")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memorag",
        description="MemoRAG: a memory model reads a long context once; its clues drive retrieval; a generator answers.",
    )
    from memorag import __version__

    parser.add_argument("--version", action="version", version=f"memorag {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    memorize = commands.add_parser(
        "memorize", help="build and save the memory and the index of documents",
        description="Memorize documents (PDF, Word, HTML, Markdown, text; folders walked) into DIR: the memory, the "
                    "chunks, the index and a manifest. If DIR already holds a memorag save made with the same models, "
                    "new files are added to it (the memory is extended, the index grows) and files already there are "
                    "skipped. A file that cannot be read is reported on one line and the others are memorized "
                    "(exit status 2).",
    )
    memorize.add_argument("context", nargs="+", metavar="CONTEXT",
                          help="documents: PDF, Word (.docx), HTML, Markdown or text files, or folders of them")
    memorize.add_argument("--out", required=True, metavar="DIR", help="where to save")
    memorize.add_argument("--overwrite", action="store_true", help="replace a memorag save in DIR instead of adding to it")
    memorize.add_argument("--wait", type=float, default=300.0, metavar="S",
                          help="seconds to wait while another writer is writing DIR (default: 300)")
    _model_options(memorize, memorizing=True)
    add_document_options(memorize)

    ask = commands.add_parser(
        "ask", help="answer a query about a memorized context",
        usage="memorag ask (DIR | DOCUMENT | --context FILE...) QUERY [options]",
        description="Answer QUERY from DIR (written by `memorag memorize`), from a DOCUMENT (a PDF, Word, HTML, "
                    "Markdown or text file, or a folder of them: memorized once and cached under "
                    "~/.cache/memorag/asked, or asked/ under $MEMORAG_CACHE), or from files memorized on the fly (--context). "
                    "The answer is streamed to stdout; clues, evidence (with each one's file and page or section, "
                    "and the query or clues that found it) and timings go to stderr. An empty answer, or one that "
                    "only repeats the question, is reported on stderr as \"no answer\" and not printed.",
    )
    _ask_options(ask, clues_only=False)
    _model_options(ask, memorizing=False)
    add_document_options(ask)

    clues = commands.add_parser(
        "clues", help="print the memory model's clues for a query",
        usage="memorag clues (DIR | DOCUMENT | --context FILE...) QUERY [options]",
        description="Print the clues the memory model writes for QUERY, one per line (key points with --task summarize).",
    )
    _ask_options(clues, clues_only=True)
    _model_options(clues, memorizing=False)
    add_document_options(clues)

    commands.add_parser("modes", help="list the answering modes", description="List the registered modes and their tasks.")

    from memorag.serve.command import add_serve_parser

    add_serve_parser(commands, _model_options)
    return parser


def _overrides(args: argparse.Namespace) -> dict:
    """Pipeline settings given on the command line (only those given), as typed values: each
    flag's value as argparse read it, then the `--set KEY=VALUE` texts read by the config
    engine; all checked by building a `PipelineConfig` from them."""
    from memorag.config import ConfigError, apply_overrides, config_from_dict
    from memorag.pipeline import PipelineConfig

    flags = {
        "memory_model": args.memory_model, "memory_weights": args.memory_weights, "embedder": args.embedder,
        "retriever": args.retriever, "generator": args.generator, "generator_model": args.generator_model,
        "api_key_env": args.api_key_env, "timeout": args.timeout, "max_retries": args.retries,
        "chunk_tokens": args.chunk_tokens, "overlap_tokens": args.overlap_tokens,
        "mode": getattr(args, "mode", None), "answer_max_new_tokens": getattr(args, "max_new_tokens", None),
        "summary_max_new_tokens": getattr(args, "max_new_tokens", None),
        "evidence_tokens": getattr(args, "evidence_tokens", None),
        "memory": None if args.ratio is None else {"ratios": [args.ratio]},
    }
    settings = {key: value for key, value in flags.items() if value is not None}
    settings.update(placement_settings(args))
    for item in args.set:
        if "=" not in item:
            raise CliInputError(f"--set {item!r}: write KEY=VALUE")
    try:
        settings = apply_overrides(settings, args.set)
        config = config_from_dict(PipelineConfig, settings)
    except ConfigError as error:
        given = [flag for key, flag in _FLAG_OF.items() if str(error).startswith((f"{key}=", f"{key}:"))
                 and getattr(args, flag.removeprefix("--").replace("-", "_"), None) is not None]
        if given:
            raise ConfigError(f"{given[0]}: {error}") from error
        raise
    keys = dict.fromkeys(PipelineConfig.renamed_keys.get(key, key).split(".")[0] for key in settings)
    return {key: getattr(config, key) for key in keys}


# The setting each command-line flag sets, to name the flag when its value is refused.
_FLAG_OF = {"timeout": "--timeout", "max_retries": "--retries", "chunk_tokens": "--chunk-tokens",
            "overlap_tokens": "--overlap-tokens", "answer_max_new_tokens": "--max-new-tokens",
            "evidence_tokens": "--evidence-tokens"}


def _split_target(args: argparse.Namespace) -> None:
    """Set `args.directory` (None with --context or a document), `args.documents` (a document or
    folder given in DIR's place, memorized through the cache) and `args.query` from the positionals."""
    args.documents = None
    target = list(args.target)
    if args.context:
        if not target:  # `--context a.txt b.txt "query"`: the greedy option took the query too
            target = [args.context.pop()]
        if not args.context:
            raise CliInputError("--context needs at least one file before the query")
        if len(target) != 1:
            raise CliInputError("with --context give only the query (quote it if it has spaces)")
        args.directory, args.query = None, target[0]
    elif len(target) != 2:
        raise CliInputError("give the folder written by `memorag memorize` and the query (or --context FILE ... QUERY)")
    else:
        args.directory, args.query = target
        # a folder with a manifest is a save (a damaged one is refused by loading); any other file or folder
        # holds documents
        if Path(args.directory).exists() and not (Path(args.directory) / "manifest.json").is_file():
            args.documents, args.directory = [args.directory], None
    if not args.query.strip():
        raise CliInputError("the query is empty; ask something")


# ----------------------------------------------------------------------------------------------
# output


class Console:
    def __init__(self, quiet: bool, json_output: bool):
        self.quiet, self.json = quiet, json_output

    def info(self, message: str) -> None:
        if not self.quiet:
            print(message, file=sys.stderr, flush=True)

    def answer_piece(self, piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()


def _quiet_libraries() -> None:
    """Keep the model libraries' own warnings and loading bars off the terminal."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", category=FutureWarning, module=r"memorag\.")  # our own deprecation notes
    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _describe_evidence(evidence) -> list[str]:
    lines = []
    for item in evidence:
        found = ", ".join(f"{f.label} #{f.rank}" for f in item.found_by) or ", ".join(
            "query" if index == 0 else f"clue {index}" for index in item.queries) or "-"
        snippet = " ".join(item.text.split())
        snippet = snippet[:90] + ("..." if len(snippet) > 90 else "")
        lines.append(f"  [{item.citation}] score {item.score:.4f} ({found}): {snippet}")
    return lines


def _format_timings(timings: dict[str, float]) -> str:
    return ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in timings.items())


def _reach(rag) -> dict | None:
    """How long a text the memory model reaches with the memory just made: its positions, window and
    ratio, and the longest context that fits them (None when there is no memory)."""
    if rag.memory is None:
        return None
    from memorag.memory.schedule import reach

    model = rag.memory_model
    ratio = rag.memory.ratio if rag.memory.ratio is not None else min(model.config.ratios)
    window, positions = model.config.window, model.max_positions
    return {"tokens": reach(positions, window, ratio), "positions": positions, "window": window, "ratio": ratio}


def _describe_reach(reach: dict, tokens: int) -> str:
    return (f"length: {tokens:,} tokens read, one memory entry per {reach['ratio']} tokens; the memory model reaches "
            f"{reach['tokens']:,} tokens at this ratio ({reach['positions']:,} positions, window {reach['window']}: "
            f"about (positions - window) x ratio); a longer text is refused before it is read, naming the ratio "
            f"that fits")


def answer_header(mode, task: str) -> str:
    """The line over an answer: which mode wrote it, and "from memory alone" only for a task the
    mode answers without evidence (the memorag mode's qa)."""
    if task in mode.tasks_without_evidence:
        return f"answer ({mode.name}, from memory alone):"
    return f"answer ({mode.name}):"


# ----------------------------------------------------------------------------------------------
# commands


def _read_inputs(args) -> tuple[list, int]:
    """The documents of --context or of a document given in DIR's place (none for DIR), read before
    any model work, and how many files could not be read (each reported on stderr)."""
    paths = args.context or args.documents
    return read_documents(paths, read_options(args), print_problem) if paths else ([], 0)


def _open_cached(args, console: Console, documents: list, overrides: dict):
    """The pipeline of the documents given in DIR's place: loaded from the cache when these files
    were memorized before with these settings, else memorized now and saved there: with the memory,
    which later questions in any mode reuse, except for a mode that reads gists instead (memorag-lite:
    its gists are saved, and a text longer than the memory reaches is still asked)."""
    from memorag.errors import ManifestMismatchError, SaveFormatError
    from memorag.pipeline import IDENTITY_KEYS, MemoRAG, get_mode, is_saved_pipeline

    folder = cache_root() / cache_key(args.documents, read_options(args), overrides, IDENTITY_KEYS)
    if is_saved_pipeline(folder):
        try:
            console.info(f"loading the memorized {', '.join(args.documents)} from the cache ({folder})...")
            return MemoRAG.load(folder, **overrides)
        except (SaveFormatError, ManifestMismatchError) as error:
            console.info(f"the cached save does not load ({error}); memorizing again")
    gists_instead = get_mode(overrides.get("mode") or "memorag").needs_gists
    rag = _memorize_now(console, documents, overrides, needs_memory=not gists_instead)
    rag.save(folder)
    console.info(f"cached in {folder}")
    return rag


def _memorize_now(console: Console, documents: list, overrides: dict, needs_memory: bool):
    """A new pipeline holding `documents` (already read), memorized now."""
    from memorag.generation import is_endpoint
    from memorag.pipeline import MemoRAG

    _quiet_libraries()
    rag = MemoRAG(**overrides)
    rag.check_models()
    if is_endpoint(rag.config.generator):
        rag.check_generator()
    console.info(f"memorizing {len(documents)} file(s)...")
    report = rag.memorize(documents, with_memory=needs_memory, show_progress=not console.quiet)
    console.info(f"memorized: {len(rag.chunks)} chunks"
                 + (f", memory of {report.memory_tokens:,} tokens" if report.memory_tokens else "")
                 + (f", gist memory of {report.num_gists} gists" if report.num_gists else "")
                 + f" ({_format_timings(report.timings)})")
    return rag


def _open_pipeline(args, console: Console, documents: list, overrides: dict, needs_memory: bool):
    """A pipeline from DIR, from a document given in DIR's place (through the cache), or from the
    --context `documents` (already read) memorized now."""
    from memorag.generation import is_endpoint
    from memorag.pipeline import MemoRAG

    directory = args.directory
    if args.documents:
        _quiet_libraries()
        rag = _open_cached(args, console, documents, overrides)
        if is_endpoint(rag.config.generator):
            rag.check_generator()
        return rag
    if directory is None:
        return _memorize_now(console, documents, overrides, needs_memory)
    console.info(f"loading {directory}...")
    _quiet_libraries()
    rag = MemoRAG.load(directory, **overrides)
    if is_endpoint(rag.config.generator):
        rag.check_generator()
    return rag


def cmd_memorize(args, console: Console) -> int:
    documents, unread = read_documents(args.context, read_options(args), print_problem)
    from memorag.generation import is_endpoint
    from memorag.pipeline import MemoRAG, check_save_target, is_saved_pipeline
    from memorag.storage.locking import save_lock

    overrides = _overrides(args)
    if not args.wait >= 0:
        raise CliInputError(f"--wait {args.wait}: give the seconds to wait, 0 or more")
    out = Path(args.out)
    check_save_target(out)
    _quiet_libraries()
    started = time.perf_counter()
    # One writer at a time: the lock is taken before the old save is read and released after the
    # new one is in place, so a concurrent writer's documents are read, not lost.
    with save_lock(out, args.wait, notify=console.info):
        check_save_target(out)
        if is_saved_pipeline(out) and not args.overwrite:
            console.info(f"{out} holds a memorag save; adding to it")
            rag = MemoRAG.load(out, **overrides)
        else:
            rag = MemoRAG(**overrides)
            rag.check_models()
        if is_endpoint(rag.config.generator):
            rag.check_generator()
        report = rag.memorize(documents, show_progress=not console.quiet)
        if report.added:
            rag.save(out, wait=args.wait)
    seconds = time.perf_counter() - started
    summary = {
        "out": str(out), "added": report.added, "skipped": report.skipped, "num_documents": len(rag.documents),
        "num_chunks": len(rag.chunks), "memory_tokens": report.memory_tokens, "unread": unread,
        "memory_entries": rag.memory.num_entries if rag.memory is not None else 0,
        "memory_weights": rag.config.memory_weights, "reach": _reach(rag), "num_gists": report.num_gists,
        "timings": {**report.timings, "total": round(seconds, 3)},
    }
    if console.json:
        print(json.dumps(summary, ensure_ascii=False))
    elif report.added:
        memory = (f"gist memory of {report.num_gists} gists" if report.num_gists and rag.memory is None else
                  f"memory of {report.memory_tokens:,} tokens in {summary['memory_entries']:,} entries")
        print(f"memorized {len(report.added)} document(s) into {out}: {len(rag.documents)} document(s), "
              f"{len(rag.chunks)} chunks, {memory} ({seconds:.1f} s)")
        if summary["reach"] is not None:
            console.info(_describe_reach(summary["reach"], report.memory_tokens))
        console.info(f"timings: {_format_timings(report.timings)}")
    else:
        print(f"already memorized: {out} holds these documents with the same models; nothing to do")
    if report.skipped and report.added:
        console.info(f"skipped (already memorized): {', '.join(report.skipped)}")
    if memory_weights_are_untrained(rag.config.memory_model, rag.config.memory_weights) and not console.json:
        console.info("note: the memory weights are untrained (copies of the base model's); pass --memory-weights "
                     "for trained ones")
    return _unread_status(unread)


def _unread_status(unread: int) -> int:
    """Exit status 2 when some files could not be read (each reported already), after the others were used."""
    if unread:
        print(f"memorag: error: {unread} file(s) could not be read (see above); the others were used",
              file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def cmd_ask(args, console: Console) -> int:
    query = args.query
    files, unread = _read_inputs(args)
    from memorag.pipeline import get_mode

    overrides = _overrides(args)
    mode = get_mode(overrides.get("mode") or "memorag")
    task = args.task or mode.default_task
    if task not in mode.tasks:
        raise CliInputError(f"mode {mode.name!r} does not do task {task!r}; its tasks: {', '.join(mode.tasks)}")
    rag = _open_pipeline(args, console, files, overrides, needs_memory=mode.needs_memory)
    streamed = []
    header = [] if console.json else [answer_header(mode, task)]  # shown once, before the answer

    def show_header():
        if header:
            console.info(header.pop())

    def on_clues(clues):
        if clues:
            console.info("clues:\n" + "\n".join(f"  {number}. {clue}" for number, clue in enumerate(clues, 1)))
        else:
            console.info("clues: none usable (the query retrieves alone)")

    def on_evidence(evidence):
        console.info(f"evidence: {len(evidence)} chunks, {sum(e.num_tokens for e in evidence)} tokens")
        for line in _describe_evidence(evidence):
            console.info(line)

    def on_text(piece):  # the answer as it is written; `ask` never passes on a non-answer
        streamed.append(piece)
        if not console.json:
            show_header()
            console.answer_piece(piece)

    answer = rag.ask(query, task=task, on_text=on_text, on_clues=on_clues, on_evidence=on_evidence,
                     show_progress=not console.quiet)
    if console.json:
        print(json.dumps(answer.to_dict(), ensure_ascii=False))
    else:
        show_header()
        if streamed:
            console.answer_piece("\n")
        if not answer.answered:  # on stderr whatever --quiet says: stdout holds no answer
            print(describe_no_answer(answer.no_answer), file=sys.stderr, flush=True)
        if answer.sources:
            console.info("sources: " + "; ".join(answer.sources))
        console.info(f"timings: {_format_timings(answer.timings)} (generator: {answer.generator})")
    return _unread_status(unread)


def cmd_clues(args, console: Console) -> int:
    query = args.query
    files, unread = _read_inputs(args)
    overrides = _overrides(args)
    rag = _open_pipeline(args, console, files, overrides, needs_memory=True)
    started = time.perf_counter()
    task = args.task or "memorag"
    clues, raw = rag.clues(query, task, show_progress=not console.quiet)
    if console.json:
        print(json.dumps({"query": query, "task": task, "clues": clues, "raw": raw,
                          "seconds": round(time.perf_counter() - started, 3)}, ensure_ascii=False))
    else:
        for clue in clues:
            print(clue)
        if not clues:
            console.info("no usable clues (the memory model's replies were empty or only echoes)")
    return _unread_status(unread)


def cmd_modes(args, console: Console) -> int:
    from memorag.pipeline import available_modes, get_mode

    for name in available_modes():
        mode = get_mode(name)
        print(f"{name}: tasks {', '.join(mode.tasks)} (default {mode.default_task})")
    return EXIT_OK


def cmd_serve(args, console: Console) -> int:
    from memorag.serve.command import run_server

    settings = _overrides(args)
    _quiet_libraries()
    return run_server(args, settings, console.info)


COMMANDS = {"memorize": cmd_memorize, "ask": cmd_ask, "clues": cmd_clues, "modes": cmd_modes, "serve": cmd_serve}


def _exit_code(error: BaseException) -> int:
    return EXIT_USAGE if is_usage_error(error) else EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console(getattr(args, "quiet", False), getattr(args, "json", False))
    try:
        if args.command in ("ask", "clues"):
            _split_target(args)
        return COMMANDS[args.command](args, console)
    except KeyboardInterrupt:
        print("memorag: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # every failure becomes one clear line (MEMORAG_DEBUG=1 for the traceback)
        if os.environ.get("MEMORAG_DEBUG"):
            raise
        message = str(error) or type(error).__name__
        print(f"memorag: error: {message}", file=sys.stderr)
        return _exit_code(error)


if __name__ == "__main__":
    sys.exit(main())
