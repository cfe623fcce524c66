"""`MemoRAG`: memorize a corpus once, then answer questions about it, in one of several modes.

    rag = MemoRAG()                                   # embedded models, offline
    rag.memorize(open("book.txt").read())             # memory + chunks + dense index
    answer = rag.ask("Who raised Esther?")            # task "memorag", mode "memorag"
    print(answer.answer, answer.clues, answer.evidence)
    rag.save("book.memorag"); rag = MemoRAG.load("book.memorag")

What `memorize` builds, shared by every mode:
- the documents, cut into token chunks (`chunk_tokens`, `overlap_tokens`) that keep
  their document id, title and character offsets;
- a retriever over the chunks: dense (the embedder + exact faiss inner product),
  BM25, or both fused (`retriever="hybrid"`);
- the memory: the memory model reads every document, in order, into one `Memory`.

Adding documents later is incremental: only the new chunks are embedded (the index
grows), and the memory is EXTENDED: the memory model reads the new text after the old
one, continuing the memory it already has, so the result is the memory of the old and
new text read one after the other. Nothing is re-read. Memorizing a document that is
already there (same title and text) is skipped. A document whose id is known but whose
text changed is refused: a memory cannot forget, so memorize into a new pipeline.

Tasks (`ask(query, task=...)`) in the default `memorag` mode:
- `memorag`: the memory model writes clues (evidence spans, surrogate questions, a
  draft answer); the query and every clue retrieve their top `memorag_hits`; the hits
  are unioned (round-robin by rank, `memorag_evidence="union"`) or fused, fitted to a
  token budget that fits the generator's window, put in document order, and the
  generator answers from them;
- `qa`: the memory model answers from its memory alone;
- `summarize`: the memory model lists key points; the request and each point
  retrieve; the generator summarizes the evidence.
The query always retrieves too (its first hit comes first in the round-robin; with
fusion it weighs `query_weight`), so the answer stays grounded even when the clues
are poor (e.g. untrained memory weights).

Modes are one interface (`memorag.modes.Mode`: `prepare(context)`, `answer(context, query,
task, hooks)`), registered by name with `@register_mode`; see `Mode` for how to add one. A
mode is handed a `ModeContext` (`memorag.modes.context`), never the pipeline: the modes
import nothing from this package.

The package's modules: `types` (settings; the errors and results it names live in
`memorag.errors` and `memorag.modes.results`, below the pipeline and the modes), `core`
(`MemoRAG`), `corpus` (`MemorizedCorpus`: documents, hashes, chunks, index, memory and
version in one object that only it writes, with its own save and load), `persistence`
(the save's manifest, lock and checks), `helpers`, `search`; none imports `core` but the
package itself (tests/test_import_graph.py); the modes, their context and the
evidence step live in `memorag.modes`.
"""

from memorag.modes.base import _MODES, Mode, available_modes, get_mode, register_mode
from memorag.pipeline.assistant import MemoRAG
from memorag.pipeline.corpus import MemorizedCorpus
from memorag.pipeline.helpers import as_documents
from memorag.pipeline.persistence import (
    CHUNKS,
    DOCUMENTS,
    FORMAT,
    FORMAT_VERSION,
    INDEX,
    MANIFEST,
    MEMORY,
    check_save_target,
    is_saved_pipeline,
    read_manifest,
)
from memorag.pipeline.types import (
    CLUE_KINDS,
    IDENTITY_KEYS,
    RETRIEVERS,
    TASKS,
    Answer,
    AskHooks,
    Corpus,
    DocumentConflictError,
    EmptyCorpusError,
    Evidence,
    FewShotExample,
    InputError,
    ManifestMismatchError,
    MemorizeReport,
    PipelineConfig,
    PipelineError,
    QueryTooLongError,
    SaveDirectoryError,
    SaveFormatError,
    Task,
    UnknownModeError,
    UnsupportedTaskError,
    timed,
)

__all__ = [
    "Answer",
    "AskHooks",
    "CHUNKS",
    "CLUE_KINDS",
    "Corpus",
    "DOCUMENTS",
    "DocumentConflictError",
    "EmptyCorpusError",
    "Evidence",
    "FewShotExample",
    "FORMAT",
    "FORMAT_VERSION",
    "IDENTITY_KEYS",
    "INDEX",
    "InputError",
    "MANIFEST",
    "MEMORY",
    "ManifestMismatchError",
    "MemoRAG",
    "MemorizedCorpus",
    "MemorizeReport",
    "Mode",
    "PipelineConfig",
    "PipelineError",
    "QueryTooLongError",
    "RETRIEVERS",
    "SaveDirectoryError",
    "SaveFormatError",
    "TASKS",
    "Task",
    "UnknownModeError",
    "UnsupportedTaskError",
    "_MODES",
    "as_documents",
    "register_mode",
    "timed",
    "available_modes",
    "check_save_target",
    "get_mode",
    "is_saved_pipeline",
    "read_manifest",
]
