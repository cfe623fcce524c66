"""Named corpora in one folder, over one shared set of models.

`CorpusStore(root, settings)` keeps each corpus as a saved pipeline in `root/NAME/`
(written atomically by `MemoRAG.save`). The memory model, the embedder and the
generator are loaded once, by `load_models()`, and handed to every corpus's pipeline,
so a corpus costs only its own memory, chunks and index. At most `max_loaded`
pipelines stay in memory (least recently used first out); a dropped one is reloaded
from its folder when asked again, and its memory is returned to the system
(`memorag.runtime.memtrim.release_memory`).

The store is not thread-safe by itself: `memorag.serve.app` runs every call that
touches models or pipelines on one worker thread.

Several stores (server replicas, in processes of their own) may share one folder. A pipeline
kept in memory is used only while its save is the one it was loaded from (the manifest's
inode, size and time: every save writes a new manifest), else it is loaded again, so a corpus
written through one replica is answered by the others at once. A memorize holds the corpus's
writer lock (`memorag.storage.locking.save_lock`, across processes) from reading the saved corpus to
putting the new save in place, so two replicas adding to one corpus both end in it; a delete
holds it too. A replica killed mid-write leaves the save whole (`memorag.storage.io.swap_directory`).
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memorag.modes.base import describe_modes
from memorag.pipeline import (
    MANIFEST,
    Answer,
    Evidence,
    InputError,
    MemoRAG,
    MemorizeReport,
    PipelineError,
    is_saved_pipeline,
    read_manifest,
)
from memorag.retrieval.chunking import Document
from memorag.runtime.embedded import (
    EMBEDDED_EMBEDDER_NAME,
    EMBEDDED_LM_NAME,
    describe_memory_weights,
    is_embedded_embedder,
    is_embedded_lm,
)
from memorag.runtime.memtrim import release_memory
from memorag.serve.guard import clip
from memorag.serve.originals import Originals
from memorag.serve.pages import DEFAULT_WIDTH, RenderedPage, render_page
from memorag.serve.sources import passage_context, passage_on_page
from memorag.storage.io import interrupted_targets
from memorag.storage.locking import recover_save, save_lock

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class CorpusNotFoundError(PipelineError):
    """A corpus name the store does not hold."""


class WorkTooLargeError(InputError):
    """A request for more work than the server's limits allow (HTTP 413)."""


def check_name(name: str) -> str:
    """`name` if it is a valid corpus name (it becomes a folder name), else InputError."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        shown = repr(name[:64]) + f"... ({len(name):,} characters)" if isinstance(name, str) and len(name) > 64 \
            else repr(name)
        raise InputError(
            f"corpus name {shown} is not allowed; use 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return name


def save_stamp(path: Path) -> tuple[int, ...] | None:
    """What tells one save of a corpus from the next: its manifest's inode, size and time."""
    try:
        manifest = (path / MANIFEST).stat()
    except FileNotFoundError:
        return None
    return manifest.st_ino, manifest.st_size, manifest.st_mtime_ns


def embedder_words(name: str | None) -> str:
    """The embedder's name for people: the embedded one by its model's name."""
    return EMBEDDED_EMBEDDER_NAME if name is None or is_embedded_embedder(name) else name


class CorpusStore:
    """Corpora saved under `root`, asked through pipelines that share one set of models;
    `lock_wait`: seconds a write waits for another process writing the same corpus."""

    def __init__(self, root: str | os.PathLike[str], settings: dict[str, Any] | None = None, *,
                 max_loaded: int = 4, memory_model=None, embedder=None, embedder_name: str | None = None,
                 generator=None, lock_wait: float = 300.0):
        if max_loaded < 1:
            raise ValueError(f"max_loaded={max_loaded} must be at least 1")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.settings = dict(settings or {})
        self.max_loaded = max_loaded
        self.lock_wait = lock_wait
        # the names of models handed in (not loaded from the settings), for `describe_models`
        self._given_names = {"memory_model": getattr(memory_model, "name", None),
                             "generator": getattr(generator, "name", None)}
        handed = {"memory_model": memory_model, "embedder": embedder, "generator": generator}
        # a model handed in stands for the setting of its name (`--set generator=...` names one to load)
        self._models = MemoRAG(embedder_name=embedder_name, **{
            **self.settings, **{key: model for key, model in handed.items() if model is not None}})
        self._loaded: OrderedDict[str, tuple[MemoRAG, tuple[int, ...] | None]] = OrderedDict()
        self._loaded_lock = threading.Lock()  # `loaded` is read by the event loop while the worker changes it
        self.originals = Originals(self.root)
        self._views: dict[str, Any] = {}  # `decode_through`

    # -- models -----------------------------------------------------------------------------------
    @property
    def models(self) -> MemoRAG:
        """The pipeline that holds the models every corpus shares (it holds no corpus itself)."""
        return self._models

    def load_models(self) -> dict[str, str]:
        """Load the shared models now (the first request would otherwise pay for it); their names."""
        models = self._models
        models.check_models()
        models.memory_model  # noqa: B018 -- loads it
        if models.config.retriever != "bm25":
            models.embedder  # noqa: B018
        models.generator.check()
        return self.describe_models()

    def model_modules(self) -> list[Any]:
        """The torch modules that do the model work, for the worker's safe points: the memory
        model's token embedding (called once per step: a memorized window's piece, a decoding round, the
        generator's too when it shares the memory model's base, whichever path runs the layers), a
        separate local generator's token embedding alike, the embedder."""
        import torch

        models = self._models
        modules = [models.memory_model.embed_tokens]
        generator_model = getattr(models.generator, "model", None)
        if isinstance(generator_model, torch.nn.Module) and not getattr(models.generator, "shared", False):
            modules.append(generator_model.get_input_embeddings())
        if models.config.retriever != "bm25" and isinstance(models.embedder, torch.nn.Module):
            modules.append(models.embedder)
        return modules

    def check_size(self, documents: list[Document], max_tokens: int) -> int:
        """The tokens `documents` hold (titles included), refused beyond `max_tokens` before any
        model work; counted with the memory model's tokenizer, stopping as soon as it is over."""
        tokenizer = self._models.tokenizer
        total = 0
        for document in documents:
            for text in (document.title, document.text):
                if text:
                    total += len(tokenizer(text, add_special_tokens=False)["input_ids"])
            if total > max_tokens:
                raise WorkTooLargeError(
                    f"the documents hold more than {max_tokens:,} tokens ({total:,} so far); this server memorizes "
                    f"at most {max_tokens:,} per request (--max-memorize-tokens): send them in smaller requests"
                )
        return total

    def describe_models(self) -> dict[str, str]:
        """The models in words: the memory model's base (the embedded one by its model's name), its weights,
        the embedder, the retriever and the generator (`generator_is_memory_base`: the memory model's base
        writes the answers, no generator was given)."""
        config = self._models.config
        memory_base = self._given_names["memory_model"] or \
            (EMBEDDED_LM_NAME if is_embedded_lm(config.memory_model) else str(config.memory_model))
        return {
            "memory_model": memory_base,
            "memory_weights": describe_memory_weights(config.memory_model, config.memory_weights),
            "embedder": embedder_words(self._models.embedder_name) if config.retriever != "bm25" else "none (bm25)",
            "retriever": config.retriever,
            "generator": self._given_names["generator"] or str(config.generator or memory_base),
            "generator_is_memory_base": config.generator is None and self._given_names["generator"] is None,
        }

    def describe_modes(self) -> list[dict[str, str | None]]:
        """Each mode in words under this server's settings (`memorag.modes.base.describe_modes`)."""
        return describe_modes(self._models.config)

    def decode_through(self, views: dict[str, Any] | None) -> None:
        """Hand the corpora's pipelines these views of the shared models from now on (`memory_model`,
        `generator`: `decoding_through` views whose greedy decodings join the server's running batch,
        memorag/serve/batching.py), or the models themselves again (None). Pipelines loaded before are
        dropped, to be loaded again with them."""
        self._views = dict(views or {})
        with self._loaded_lock:
            names = list(self._loaded)
        for name in names:
            self.drop(name)

    def _shared(self) -> dict[str, Any]:
        models = self._models
        shared = {"memory_model": models.memory_model, "generator": models.generator, **self._views}
        if models.config.retriever != "bm25":
            shared.update(embedder=models.embedder, embedder_name=models.embedder_name)
        return shared

    # -- corpora ------------------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.root / check_name(name)

    def exists(self, name: str) -> bool:
        return is_saved_pipeline(self.path(name))

    def names(self) -> list[str]:
        for missing in interrupted_targets(self.root):  # a corpus whose writer died while putting it in place
            recover_save(missing)
        return sorted(entry.name for entry in self.root.iterdir()
                      if NAME_PATTERN.fullmatch(entry.name) and is_saved_pipeline(entry))

    def describe(self, name: str) -> dict[str, Any]:
        """What a saved corpus holds, from its manifest (no model is touched)."""
        manifest = read_manifest(self._existing(name))
        memory = manifest.get("memory") or {}
        return {"name": name, "documents": [document["id"] for document in manifest["documents"]],
                "num_chunks": manifest["num_chunks"], "memory_tokens": memory.get("num_tokens", 0),
                "memory_entries": memory.get("num_entries", 0), "loaded": name in self.loaded}

    def _existing(self, name: str) -> Path:
        path = self.path(name)
        if not is_saved_pipeline(path):
            raise CorpusNotFoundError(f"no corpus named {name!r}; memorize into it first (POST /corpora/{name}/memorize)")
        return path

    def pipeline(self, name: str) -> MemoRAG:
        """The corpus's pipeline: from memory, else loaded (and verified) from its folder."""
        path = self._existing(name)
        stamp = save_stamp(path)
        with self._loaded_lock:
            if name in self._loaded and self._loaded[name][1] == stamp:
                self._loaded.move_to_end(name)
                return self._loaded[name][0]
        self.drop(name)  # another replica saved it since it was loaded here
        rag = MemoRAG.load(path, **self._shared(), **self._free_settings())
        self._keep(name, rag, stamp)
        return rag

    def _free_settings(self) -> dict[str, Any]:
        """Settings a load takes from this server (identity settings are checked against the save)."""
        return {key: value for key, value in self.settings.items() if key not in ("memory_model", "embedder", "generator")}

    def _keep(self, name: str, rag: MemoRAG, stamp: tuple[int, ...] | None) -> None:
        evicted = False
        with self._loaded_lock:
            self._loaded[name] = (rag, stamp)
            self._loaded.move_to_end(name)
            while len(self._loaded) > self.max_loaded:
                self._loaded.popitem(last=False)
                evicted = True
        if evicted:
            release_memory()

    def memorize(self, name: str, documents: list[Document], overwrite: bool = False,
                 max_tokens: int | None = None, originals: dict[str, bytes] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> MemorizeReport:
        """Add `documents` to the corpus (made if new, or replaced with `overwrite`) and save it.

        `max_tokens`: refuse (`WorkTooLargeError`) documents holding more tokens, before any model work.
        Holds the corpus's writer lock throughout, so another process's save is read, not lost.
        `originals`: the uploaded PDF files by document id, kept once the save holds them (`Originals`).
        `on_progress(done, total)`: the memory's tokens read, after each window (`MemoRAG.memorize`).
        If anything fails or the job is cancelled, the corpus stays as last saved."""
        if max_tokens is not None:
            self.check_size(documents, max_tokens)
        path = self.path(name)
        with save_lock(path, self.lock_wait):
            if overwrite or not is_saved_pipeline(path):
                self.drop(name)
                rag = MemoRAG(self._models.config, **self._shared())
            else:
                rag = self.pipeline(name)
            try:
                report = rag.memorize(documents, show_progress=False, on_progress=on_progress)
                if report.added:
                    rag.save(path)
                    self.originals.keep(name, originals or {}, [document.id for document in rag.documents])
            except BaseException:
                self.drop(name)  # a half-built index or the unsaved new state; the save on disk is whole (atomic)
                raise
            self._keep(name, rag, save_stamp(path))
        release_memory()
        return report

    def ask(self, name: str, query: str, task: str | None = None, mode: str | None = None, *,
            on_text: Callable[[str], None] | None = None, on_clues: Callable[[list[str]], None] | None = None,
            on_evidence: Callable[[list[Evidence]], None] | None = None) -> Answer:
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty; ask something")
        return self.pipeline(name).ask(query, task=task, mode=mode, on_text=on_text, on_clues=on_clues,
                                       on_evidence=on_evidence)

    def clues(self, name: str, query: str, task: str = "memorag") -> tuple[list[str], dict[str, str]]:
        """The memory's clues for `query`; like `ask`, a query that leaves the generator's window no
        room for evidence is refused before any model work."""
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty; ask something")
        rag = self.pipeline(name)
        if task in ("memorag", "summarize"):  # other tasks are refused by `clues` itself
            context = rag.context("memorag")
            context.evidence.room_for_evidence(query.strip(), task, context.language_of(query.strip()))
        return rag.clues(query, task)

    def drop(self, name: str) -> None:
        """Forget the corpus's pipeline in memory (its folder stays)."""
        with self._loaded_lock:
            dropped = self._loaded.pop(name, None)
        if dropped is not None:
            del dropped
            release_memory()

    def delete(self, name: str) -> None:
        """Remove the corpus, in memory and on disk."""
        path = self._existing(name)
        with save_lock(path, self.lock_wait):
            self.drop(name)
            shutil.rmtree(path)
            self.originals.remove(name)

    def document(self, name: str, doc_id: str) -> Document:
        """The corpus's document `doc_id`, as memorized (its text, pages and headings)."""
        for document in self.pipeline(name).documents:
            if document.id == doc_id:
                return document
        raise CorpusNotFoundError(f"corpus {name!r} has no document {clip(doc_id)!r}; GET /corpora/{name} lists them")

    def passage(self, name: str, doc_id: str, start_char: int, end_char: int, page: int | None = None
                ) -> dict[str, Any]:
        """The page (`page`, or the passage's first), section or text around a passage of evidence
        (`memorag.serve.sources`), and whether its pages can be shown as images (the PDF was kept)."""
        context = passage_context(self.document(name, doc_id), start_char, end_char, page)
        context["page_images"] = bool(context["pages"]) and self.originals.path(name, doc_id).is_file()
        return context

    def page_image(self, name: str, doc_id: str, page: int, start_char: int | None = None,
                   end_char: int | None = None, width: int = DEFAULT_WIDTH) -> RenderedPage:
        """Page `page` of the kept PDF of `doc_id` as a PNG, the part of the passage on it marked."""
        document = self.document(name, doc_id)
        data = self.originals.read(name, doc_id)
        if data is None:
            raise CorpusNotFoundError(f"no PDF is kept for document {clip(doc_id)!r} of corpus {name!r}: only PDFs "
                                      "uploaded as files are kept; memorize the file again to see its pages")
        passage = "" if start_char is None or end_char is None else \
            passage_on_page(document, start_char, end_char, page)
        return render_page(data, page, passage, width)

    @property
    def loaded(self) -> list[str]:
        with self._loaded_lock:
            return list(self._loaded)
