"""Tools that build files the project ships (e.g. the fitted verdict models in ``models/``).

Run each as a module from the repository root, e.g. ``.venv/bin/python -m
tools.fit --card smollm2-135m-instruct``; README.md in this folder says what each one writes. They import the
library only through ``offline_scorer`` and ``offline_scorer.toolkit``.
"""
