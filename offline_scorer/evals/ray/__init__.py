"""The Ray backend of ``run_evals``: only what is Ray-specific (needs ``offline-scorer[ray]``).

``run_evals(..., backend="ray")`` lands in :mod:`._backend`. The dataset becomes a Ray
Dataset (:mod:`._source`: Ray Data readers for JSONL, CSV and Parquet files; in-memory data
is checked on the driver first), a cheap task pass checks every row before any model loads,
then ``map_batches`` sends batches to a fixed pool of scoring actors (:mod:`._actors`). Each
actor loads one judge (behind the result cache when one is asked for) and scores its batch
with the same ``score_chunk`` as a local run, and returns flat rows (:mod:`._results`). The
driver folds those rows into the same summary as a local run. What a run is asked to do,
and what every actor receives, is in :mod:`._options`; joining Ray, in :mod:`._cluster`.

Ray is imported only inside these functions: ``import offline_scorer`` never imports it.
Ray's usage statistics are switched off (``RAY_USAGE_STATS_ENABLED=0``) and its dashboard
is not started, so nothing leaves the machine.
"""
