"""Evaluation tasks: what the harness asks and where the questions come from.

The examples, the packaged real sets, their builders and the generated tasks live in
:mod:`memorag.evaluation.datasets` (the training data reads them too, and must not import the harness).
Of its own this package holds:

* ``loaders`` - benchmarks in their original formats (LongBench, InfiniteBench, UltraDomain,
  LongRAG, LOFT).

The metrics that score the answers are in :mod:`memorag.evaluation.metrics`.
"""
