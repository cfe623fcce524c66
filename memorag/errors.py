"""The errors of answering over a memorized corpus: each says why, and what to do.

They sit below the pipeline and the modes, which both raise them, and below the two front ends,
the command line and `memorag serve`, which share `is_usage_error`: whether a failure is the
input's fault (exit status 2 on the command line, HTTP 400 from the server).
"""

from __future__ import annotations


class PipelineError(RuntimeError):
    """Something the pipeline cannot do, with a message that says why and what to do."""


class InputError(PipelineError, ValueError):
    """Bad input: an empty query, an empty or malformed document."""


class QueryTooLongError(InputError):
    """A query that leaves the generator's window no room for evidence and the answer."""


class UnknownModeError(PipelineError):
    """A mode name that is not registered."""


class UnsupportedTaskError(PipelineError):
    """A task the chosen mode does not do."""


class EmptyCorpusError(PipelineError):
    """Nothing has been memorized yet."""


class DocumentConflictError(PipelineError):
    """A document id that is already memorized, with another text."""


class SaveFormatError(PipelineError):
    """A directory that is not a saved pipeline, or a damaged one."""


class ManifestMismatchError(PipelineError):
    """A saved pipeline built with other models or settings than the ones asked for."""


class SaveDirectoryError(PipelineError):
    """A save target that exists and holds something else."""


class CliInputError(ValueError):
    """Bad input caught by a front end itself (the command line's files and arguments, the server's options)."""


# Failures that are the input's fault; matched by class name so that reporting an error never
# imports a heavy module.
_USAGE_ERRORS = frozenset({"CliInputError", "ConfigError", "InputError", "UnknownModeError", "UnsupportedTaskError",
                           "ContextTooLongError", "SaveDirectoryError"})


def is_usage_error(error: BaseException) -> bool:
    """Whether `error` is the input's fault (exit 2 on the command line; HTTP 400 in `memorag serve`)."""
    names = {cls.__name__ for cls in type(error).__mro__ if cls.__module__.startswith(("memorag", "__main__"))}
    return bool(names & _USAGE_ERRORS)
