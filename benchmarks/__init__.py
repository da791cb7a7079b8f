"""The project's benchmarks: scripts that measure the library and print tables.

Run each as a module from the repository root, e.g. ``.venv/bin/python -m
benchmarks.agreement --limit 8``; README.md in this folder lists them. They import the
library only through ``offline_scorer`` and ``offline_scorer.toolkit``.
"""
