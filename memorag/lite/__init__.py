"""The Lite memory (the memorag-lite mode): gists of a long text, written by any generator, read as one prompt.

The text is cut into windows of about `window_tokens` tokens (`text_windows.py`); the generator writes
a gist of each with the reference's gist prompt (`writer.py`: batched, with a progress bar, each
gist checkpointed as it is written, so a memorize stopped half-way continues where it stopped);
the gists, joined in the reference's context prompt, are the memory (`memory.py`), which every
clue and answer reads as the prefix of its prompt: a local model computes that prefix's keys and
values once and reuses them (`LocalGenerator.generate_with_prefix`), an endpoint server keeps its
own prefix cache. The gists are sized so that the memory, a prompt and its reply fit the
generator's positions (`budget.py`); a text whose memory cannot fit is refused before any gist is
written.
"""

from memorag.lite.budget import GistBudget, GistMemoryTooLongError, plan_gist_budget
from memorag.lite.memory import Gist, GistMemory
from memorag.lite.settings import GistSettings
from memorag.lite.text_windows import GistWindow, gist_windows
from memorag.lite.writer import GistCheckpoint, write_gists

__all__ = ["Gist", "GistBudget", "GistCheckpoint", "GistMemory", "GistMemoryTooLongError", "GistSettings",
           "GistWindow", "gist_windows", "plan_gist_budget", "write_gists"]
