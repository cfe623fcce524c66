"""MemoRAG: retrieval-augmented generation driven by a long-context memory model.

A memory model reads the whole context once, keeps a compact memory of it, and
writes clues (draft answers, key phrases, sub-questions) that steer retrieval;
a generator then answers from the retrieved passages.

    from memorag import MemoRAG
    rag = MemoRAG()
    rag.memorize(text)
    print(rag.ask("question").answer)

The pipeline names are imported on first use, so `import memorag` stays light.
"""

import logging

from memorag.runtime.kernel_caches import bound_kernel_caches

__version__ = "0.1.0"

bound_kernel_caches()  # before any kernel is compiled: resident memory stays flat (see memorag/runtime/kernel_caches.py)
# faiss logs each SIMD build it tries while loading, the missing ones as errors, at INFO: noise in every command's log
logging.getLogger("faiss.loader").setLevel(logging.WARNING)

_PIPELINE_NAMES = ("MemoRAG", "Answer", "Evidence", "MemorizeReport", "PipelineConfig", "Mode", "register_mode",
                   "available_modes")

__all__ = ["__version__", *_PIPELINE_NAMES]


def __getattr__(name: str):
    if name in _PIPELINE_NAMES:
        from memorag import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'memorag' has no attribute {name!r}")
